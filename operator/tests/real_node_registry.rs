//! Benchmarks whose images come from a registry, on a real node of the dev cluster: the dev
//! cluster's registry (CNCF distribution, TLS from the cluster's CA, basic auth;
//! `membench_devcluster::registry`), which holds the engine images and the membench image under
//! a mirror's names, pulled by the node's containerd with the credentials of the pull Secret the
//! operator gives every benchmark pod (`--benchmark-image-pull-secrets`), as on a cluster whose
//! images come from a private mirror. Each test first removes the images it pulls from the
//! node, so nothing is preloaded. A version the mirror lacks, reached through the operator's
//! `--engine-registry`, ends ImagePullFailed naming the missing image, not the Secret.
//!
//! These tests need the real node and the registry: when either cannot start they fail, naming
//! what is missing.

mod common;

use std::time::Duration;

use common::faults::status_of;
use common::operator::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use membench::crd::Phase;
use membench_devcluster::EnsureOptions;
use membench_devcluster::real_nodes::{TOLERATE_REAL_NODES, ensure_real_node, remove_images};
use membench_devcluster::registry::{REGISTRY_USER, Registry};

/// The tests run one at a time: the real node has room for one benchmark's pods (an engine
/// pod waiting on a pull holds its CPU), and each reads the registry's log of its own pulls.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One small Redis 8.2.3 run from `image`, on the real node's instance type.
fn redis_from(image: &str) -> String {
    format!(
        "  instanceType: r7i.xlarge\n  engines:\n    - {{engine: redis, version: \"8.2.3\", image: \"{image}\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: 1\n{TOLERATE_REAL_NODES}"
    )
}

/// [`real_node_settings`] with the registry's engine images allowed and `secret` given to every
/// benchmark pod.
fn settings_for(
    registry: &Registry,
    secret: &str,
) -> membench::controller::decide::observation::Settings {
    let mut settings = real_node_settings();
    settings
        .policy
        .allowed_images
        .push(format!("{}/library/redis", registry.host));
    settings.pods.image_pull_secrets = vec![secret.to_string()];
    settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_benchmark_pulls_its_engine_and_client_images_from_the_registry_with_the_operators_pull_secret()
-> anyhow::Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    ensure_real_node(&EnsureOptions::default()).await?;
    let registry = Registry::of_dev_cluster(&EnsureOptions::default()).await?;
    let engine_image = registry.engine_image("redis:8.2.3");
    let version = env!("CARGO_PKG_VERSION");
    let client_image = registry.membench_image(version);
    for repository in [
        format!("{}/library/redis", registry.host),
        format!("{}/membench/membench", registry.host),
    ] {
        remove_images(&EnsureOptions::default(), &repository).await?;
    }
    let mut settings = settings_for(&registry, "mirror-creds");
    settings.pods.client_image = client_image.clone();
    let harness = Harness::start("real-registry", settings).await?;
    registry
        .create_pull_secret(&harness.client, harness.namespace.name(), "mirror-creds")
        .await?;
    let offset = registry.log_offset()?;
    harness
        .create(&spec("mirrored", &redis_from(&engine_image)))
        .await?;
    let done = harness
        .finished("mirrored", Duration::from_secs(240))
        .await?;
    let status = done.status.as_ref().expect("a status");
    assert_eq!(status.phase, Some(Phase::Succeeded), "{}", status_of(&done));
    assert_eq!(
        status.engines[0].image.as_deref(),
        Some(engine_image.as_str())
    );
    assert!(status.engines[0].summary.is_some(), "{}", status_of(&done));

    // Both images were pulled from the registry, by containerd, as the Secret's user.
    let served = registry.served_since(offset)?;
    for manifest in [
        "/v2/library/redis/manifests/8.2.3".to_string(),
        format!("/v2/membench/membench/manifests/{version}"),
    ] {
        assert!(
            served
                .iter()
                .any(|r| r.is_containerd_fetch_of(&manifest, REGISTRY_USER)),
            "the registry's log shows no pull of {manifest} by containerd since the benchmark \
             was created (is the membench image {client_image} pushed? hack/dev-cluster.sh up \
             pushes hack/build-image.sh's archive, MEMBENCH_IMAGE_ARCHIVE): {served:#?}"
        );
    }
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_secret_the_registry_refuses_ends_image_pull_failed_naming_the_registry_and_the_secret()
-> anyhow::Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    ensure_real_node(&EnsureOptions::default()).await?;
    let registry = Registry::of_dev_cluster(&EnsureOptions::default()).await?;
    let image = registry.engine_image("redis:8.2.3");
    remove_images(
        &EnsureOptions::default(),
        &format!("{}/library/redis", registry.host),
    )
    .await?;
    let harness = Harness::start(
        "real-refused",
        settings_for(&registry, "stale-mirror-creds"),
    )
    .await?;
    let secret = registry.pull_secret_with("stale-mirror-creds", REGISTRY_USER, "an-old-password");
    harness
        .namespace
        .api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await?;
    harness
        .create(&spec("refused", &redis_from(&image)))
        .await?;
    let done = harness
        .finished("refused", Duration::from_secs(120))
        .await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("ImagePullFailed"),
        "{}",
        status_of(&done)
    );
    let message = first.message.as_deref().unwrap_or_default();
    assert!(
        message.contains(&format!("cannot pull the engine image {image}"))
            && message.contains("401 Unauthorized")
            && message.contains(&format!("registry {};", registry.host))
            && message.contains(&format!(
                "the imagePullSecret stale-mirror-creds (namespace {})",
                harness.namespace.name()
            )),
        "{message}"
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_the_engine_mirror_lacks_ends_image_pull_failed_naming_the_missing_image()
-> anyhow::Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    ensure_real_node(&EnsureOptions::default()).await?;
    let registry = Registry::of_dev_cluster(&EnsureOptions::default()).await?;
    let mut settings = settings_for(&registry, "mirror-creds");
    // The chart's engineRegistry: every engine's default image comes from the mirror, and its
    // repositories are allowed as the operator's flags allow them.
    let mirror =
        membench::controller::build::engine_registry::EngineRegistry::parse(&registry.host)
            .map_err(anyhow::Error::msg)?;
    settings.policy.allowed_images =
        membench::controller::decide::policy::Policy::allowed_images_with(
            Some(settings.policy.allowed_images.clone()),
            Some(&mirror),
        );
    settings.pods.engine_registry = Some(mirror);
    let harness = Harness::start("real-missing", settings).await?;
    registry
        .create_pull_secret(&harness.client, harness.namespace.name(), "mirror-creds")
        .await?;
    // Redis 7.2.4 is a real release, but the dev cluster's mirror holds only the engine
    // store's versions (hack/node-images.sh).
    let body = format!(
        "  instanceType: r7i.xlarge\n  engines:\n    - {{engine: redis, version: \"7.2.4\"}}\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 0}}}}\n  repetitions: 1\n{TOLERATE_REAL_NODES}"
    );
    harness.create(&spec("missing", &body)).await?;
    let done = harness
        .finished("missing", Duration::from_secs(180))
        .await?;
    let first = engine(&done, 0);
    let image = format!("{}/library/redis:7.2.4", registry.host);
    assert_eq!(
        first.image.as_deref(),
        Some(image.as_str()),
        "{}",
        status_of(&done)
    );
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("ImagePullFailed"),
        "{}",
        status_of(&done)
    );
    let message = first.message.as_deref().unwrap_or_default();
    assert!(
        message.contains(&format!("cannot pull the engine image {image}"))
            && message.contains(&format!(
                "registry {} answered that it has no image {image}",
                registry.host
            ))
            && message.contains("engineRegistry")
            && !message.contains("holds credentials"),
        "{message}"
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mirror_holds_membench_for_both_platforms_and_each_engine_under_a_mirrors_name()
-> anyhow::Result<()> {
    // The engine images are pushed once the cluster has a real node.
    ensure_real_node(&EnsureOptions::default()).await?;
    let registry = Registry::of_dev_cluster(&EnsureOptions::default()).await?;
    let manifest = |repository: &str, tag: &str| -> anyhow::Result<serde_json::Value> {
        let raw = registry.raw_manifest(repository, tag)?.ok_or_else(|| {
            anyhow::anyhow!(
                "the registry {} has no {repository}:{tag} (hack/dev-cluster.sh up pushes it)",
                registry.host
            )
        })?;
        Ok(serde_json::from_slice(&raw)?)
    };
    // hack/build-image.sh's one index of both platforms, under the chart's appVersion.
    let index = manifest("membench/membench", env!("CARGO_PKG_VERSION"))?;
    let platforms: Vec<String> = index["manifests"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| {
                    format!(
                        "{}/{}",
                        m["platform"]["os"].as_str().unwrap_or("?"),
                        m["platform"]["architecture"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"], "{index}");
    // Each engine under the name a mirror of the official image holds, as --engine-registry
    // rewrites it.
    for (repository, tag) in [
        ("library/redis", "8.2.3"),
        ("valkey/valkey", "9.1.2"),
        ("dragonflydb/dragonfly", "v1.40.0"),
    ] {
        let image = manifest(repository, tag)?;
        assert!(
            image["layers"].as_array().is_some_and(|l| !l.is_empty())
                || image["manifests"].as_array().is_some_and(|m| !m.is_empty()),
            "{repository}:{tag}: {image}"
        );
    }
    Ok(())
}
