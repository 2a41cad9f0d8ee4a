//! A profile workload in the cluster, end to end on the dev cluster: a MemoryBenchmark whose
//! profile comes from a ConfigMap runs like any other (the client pod rebuilds it and the
//! status has bytes per key, and by type), one whose profile is larger than an environment
//! variable may be (Linux's 128 KiB) runs too, the client pod reading it from the ConfigMap
//! mounted as a file, and one whose ConfigMap is missing, whose ConfigMap's shares do not add
//! up (which no CRD rule can see) or whose rebuild needs more memory than its engine pod's
//! limit fails as InvalidSpec before any pod exists.

mod common;

use std::time::Duration;

use common::operator::*;
use common::pod_record::PodRecord;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use membench::crd::Phase;

/// 400 hashes of 3 fields (a third of them with a TTL) and 600 strings, as `membench
/// profile` would print them.
const PROFILE: &str = r#"format: 1
source: {engine: valkey, version: "9.1.2", keys: 1000}
groups:
- template: "flight:{n}"
  type: hash
  share: 0.4
  keyLength: {buckets: [[10, 11, 1]]}
  ttl: {share: 0.33, millis: {buckets: [[60000, 60000, 1]]}}
  elements: {buckets: [[3, 3, 1]]}
  fields: {textLength: {buckets: [[5, 8, 1]]}}
  values: {integerShare: 0.5, textLength: {buckets: [[3, 12, 1]]}, integerLength: {buckets: [[1, 4, 1]]}}
- template: "plane:{s}"
  type: string
  share: 0.6
  keyLength: {buckets: [[12, 12, 1]]}
  values: {textLength: {buckets: [[60, 90, 1]]}}
"#;

/// A profile of 700 key families of 4 strings each (2800 keys): about 200 KiB as YAML, more
/// than an environment variable may carry.
fn many_families() -> String {
    let mut text = "format: 1\nsource: {engine: valkey, keys: 2800}\ngroups:\n".to_string();
    for family in 0..700 {
        text.push_str(&format!(
            "- template: \"tenant{family}:session:{{n}}\"\n  type: string\n  share: {}\n  sampledKeys: 4\n  keyLength: {{buckets: [[20, 20, 1], [21, 21, 2], [22, 22, 1]]}}\n  ttl: {{share: 0.25, millis: {{buckets: [[60000, 3600000, 1]]}}}}\n  values: {{integerShare: 0.25, textLength: {{buckets: [[16, 40, 3]]}}, integerLength: {{buckets: [[1, 6, 1]]}}}}\n",
            1.0 / 700.0
        ));
    }
    text
}

/// Creates ConfigMap `name` in the harness's namespace with `profile` under `profile.yaml`.
async fn create_profile_config_map(
    harness: &Harness,
    name: &str,
    profile: String,
) -> anyhow::Result<()> {
    let config_maps: Api<ConfigMap> =
        Api::namespaced(harness.client.clone(), harness.namespace.name());
    let config_map = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some([("profile.yaml".to_string(), profile)].into()),
        ..Default::default()
    };
    config_maps
        .create(&PostParams::default(), &config_map)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_from_a_config_map_is_rebuilt_and_measured_like_any_workload()
-> anyhow::Result<()> {
    let harness = Harness::start("op-profile", settings()).await?;
    let record = PodRecord::start(harness.pods()).await?;
    create_profile_config_map(&harness, "shop-profile", PROFILE.to_string()).await?;
    let large = many_families();
    assert!(large.len() > 128 * 1024, "{} bytes", large.len());
    create_profile_config_map(&harness, "tenants-profile", large).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\"}\n  workload:\n    profile:\n      configMapRef: {name: shop-profile}\n      scale: 2\n      seed: 7\n  repetitions: 2\n";
    harness.create(&spec("shop", body)).await?;
    // The same, with a ConfigMap that does not exist.
    let missing = body.replace("shop-profile", "no-such-profile");
    harness.create(&spec("lost", &missing)).await?;
    let tenants = body
        .replace("shop-profile", "tenants-profile")
        .replace("scale: 2", "scale: 1")
        .replace("repetitions: 2", "repetitions: 1");
    harness.create(&spec("tenants", &tenants)).await?;

    let done = harness.finished("shop", Duration::from_secs(240)).await?;
    let status = done.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    let workload = status.workload.clone().unwrap_or_default();
    assert!(
        workload.contains("2000 keys") && workload.contains("seed 7"),
        "{workload}"
    );
    let engine = &status.engines[0];
    assert_eq!(engine.repetitions.len(), 2, "{engine:#?}");
    for rep in &engine.repetitions {
        // DBSIZE verified: the profile's 1000 keys, twice.
        assert_eq!(rep.items, 2000);
        // Bytes per key: 60-90 byte strings and 3-field hashes weigh more than 50 B a key.
        assert!(
            rep.bytes_per_item > 50.0 && rep.bytes_per_item < 1000.0,
            "{rep:#?}"
        );
    }
    // By type: the 1200 strings, then the 800 hashes, each with its own bytes per key.
    let by_type: Vec<(String, u64)> = engine
        .summary
        .as_ref()
        .unwrap()
        .bytes_per_key_by_type
        .iter()
        .map(|t| (t.key_type.clone(), t.keys))
        .collect();
    assert_eq!(
        by_type,
        [("string".to_string(), 1200), ("hash".to_string(), 800)],
        "{engine:#?}"
    );

    let tenants = harness
        .finished("tenants", Duration::from_secs(240))
        .await?;
    let status = tenants.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    let engine = &status.engines[0];
    assert_eq!(engine.repetitions.len(), 1, "{engine:#?}");
    assert_eq!(
        engine.repetitions[0].items, 2800,
        "DBSIZE of the 700 families"
    );

    let lost = harness.finished("lost", Duration::from_secs(60)).await?;
    let failed = condition(&lost, "Failed").expect("a Failed condition");
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", "InvalidSpec")
    );
    assert!(
        failed.message.contains("ConfigMap no-such-profile")
            && failed.message.contains("kubectl create configmap"),
        "{}",
        failed.message
    );
    // Not one pod of it, ever: watched from before it was created.
    let lost_pods = record.pods_of("lost")?;
    assert!(lost_pods.is_empty(), "{lost_pods:?}");
    // The watch saw the pods of the benchmarks that ran.
    assert!(
        !record.pods_of("shop")?.is_empty(),
        "the watch saw no pod of the benchmark that ran"
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_refuses_a_profile_both_inline_and_from_a_config_map_or_of_scale_zero()
-> anyhow::Result<()> {
    let harness = Harness::start("adm-profile", settings()).await?;
    let inline = "      source: {keys: 10}\n      groups:\n      - {template: \"k:{n}\", type: string, share: 1.0, keyLength: {buckets: [[4, 4, 1]]}, values: {textLength: {buckets: [[3, 3, 1]]}}}\n";
    for (name, extra, expected) in [
        (
            "both",
            format!("{inline}      configMapRef: {{name: shop-profile}}\n"),
            "set workload.profile inline (source and groups) or as configMapRef, not both",
        ),
        (
            "zero",
            format!("{inline}      scale: 0\n"),
            "workload.profile.scale is a factor above 0",
        ),
    ] {
        let body = format!(
            "  instanceType: r7i.4xlarge\n  engines: [{{engine: valkey, version: \"9.1.2\"}}]\n  workload:\n    profile:\n{extra}"
        );
        let err = harness
            .create(&spec(name, &body))
            .await
            .expect_err("the API server refuses it");
        assert!(err.to_string().contains(expected), "{name}: {err}");
    }
    harness.finish().await;
    Ok(())
}

/// The benchmark `name` ended as Failed/InvalidSpec with every one of `words` in its message,
/// and no pod of it was ever created (`record` watched from before it was).
async fn invalid_before_any_pod(
    harness: &Harness,
    record: &PodRecord,
    name: &str,
    words: &[&str],
) -> anyhow::Result<()> {
    let done = harness.finished(name, Duration::from_secs(60)).await?;
    let failed = condition(&done, "Failed")
        .unwrap_or_else(|| panic!("{name}: no Failed condition: {:#?}", done.status));
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", "InvalidSpec"),
        "{name}: {failed:?}"
    );
    for word in words {
        assert!(
            failed.message.contains(word),
            "{name}: {word:?} not in: {}",
            failed.message
        );
    }
    let pods = record.pods_of(name)?;
    assert!(pods.is_empty(), "{name}: pods were created: {pods:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_larger_than_the_engine_pods_memory_or_from_a_config_map_whose_shares_do_not_add_up_is_invalid_before_any_pod()
-> anyhow::Result<()> {
    let harness = Harness::start("op-profile-bad", settings()).await?;
    let record = PodRecord::start(harness.pods()).await?;
    // The CRD's rule cannot see into a ConfigMap: the operator's check of it must refuse it.
    let unsummed = PROFILE.replace("share: 0.4", "share: 0.3");
    create_profile_config_map(&harness, "unsummed-profile", unsummed).await?;
    let from_map = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\"}\n  workload:\n    profile:\n      configMapRef: {name: unsummed-profile}\n";
    harness.create(&spec("unsummed", from_map)).await?;
    // Ten million 1000-byte strings (about 10 GiB) into an engine pod of 256 MiB.
    let too_big = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: valkey, version: \"9.1.2\", memory: 256Mi}\n  workload:\n    profile:\n      source: {keys: 10000000}\n      groups:\n      - {template: \"k:{n}\", type: string, share: 1.0, keyLength: {buckets: [[12, 12, 1]]}, values: {textLength: {buckets: [[1000, 1000, 1]]}}}\n";
    harness.create(&spec("too-big", too_big)).await?;

    invalid_before_any_pod(
        &harness,
        &record,
        "unsummed",
        &[
            "ConfigMap unsummed-profile key profile.yaml",
            "shares add up to 0.9000, not 1",
        ],
    )
    .await?;
    invalid_before_any_pod(
        &harness,
        &record,
        "too-big",
        &[
            "spec.engines[0].memory is 256Mi",
            "10000000 keys",
            "raise memory, or lower workload.profile.scale",
        ],
    )
    .await?;
    harness.finish().await;
    Ok(())
}
