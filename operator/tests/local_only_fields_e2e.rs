//! A `MemoryBenchmark` written for `membench run` and created in a cluster, on the dev cluster
//! with the operator running: the engine fields only a local run applies (`binary`, `build`,
//! `ldPreload`) are refused as `InvalidSpec`, saying they apply to `membench run` only, and
//! nothing is created; `allocator: jemalloc` keeps its meaning; the API server still requires
//! an `instanceType`, which a local run does without.

mod common;

use std::time::Duration;

use common::operator::{Harness, invalid_spec_message, settings, spec};
use common::pod_record::PodRecord;
use kube::api::{ApiResource, DynamicObject, PostParams};
use membench::crd::MemoryBenchmark;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_only_engine_fields_are_invalid_spec_naming_membench_run_and_nothing_is_created()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-local-only", settings()).await?;
    // Every pod the namespace ever holds from here on, not only those left at the end.
    let record = PodRecord::start(harness.pods()).await?;
    let fields = [
        ("binary", "binary: /usr/bin/redis-server"),
        ("build", "build: redis-7.0.15-debian"),
        (
            "ldPreload",
            "ldPreload: /usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
        ),
    ];
    for (field, entry) in fields {
        let name = format!("local-{}", field.to_lowercase());
        let body = format!(
            "  instanceType: r7i.4xlarge\n  engines: [{{engine: redis, version: \"7.0.15\", {entry}}}]\n  workload: {{sortedSet: {{members: 1000, sampleEvery: 0}}}}\n"
        );
        harness.create(&spec(&name, &body)).await?;
    }
    for (field, _) in fields {
        let name = format!("local-{}", field.to_lowercase());
        let done = harness.finished(&name, Duration::from_secs(60)).await?;
        let message = invalid_spec_message(&done, &name);
        assert!(
            message.starts_with(&format!(
                "spec.engines[0].{field} applies to membench run only"
            )) && message.contains("engines[].image"),
            "{message}"
        );
    }
    // The refusal is decided before anything is created: every benchmark has its terminal
    // status, written by the same reconcile that would have created its pods.
    let pods = record.all_pods()?;
    assert!(pods.is_empty(), "{pods:?}");
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_still_requires_an_instance_type() -> anyhow::Result<()> {
    let harness = Harness::without_operator("ns-no-instance-type").await?;
    let resource = ApiResource::erase::<MemoryBenchmark>(&());
    let api: kube::Api<DynamicObject> =
        kube::Api::namespaced_with(harness.client.clone(), harness.namespace.name(), &resource);
    let object: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "membench.io/v1alpha1",
        "kind": "MemoryBenchmark",
        "metadata": {"name": "no-instance-type"},
        "spec": {
            "engines": [{"engine": "redis", "version": "7.0.15"}],
            "workload": {"sortedSet": {"members": 1000}},
        },
    }))?;
    let refused = api
        .create(&PostParams::default(), &object)
        .await
        .expect_err("a MemoryBenchmark without instanceType is refused");
    let message = refused.to_string();
    assert!(
        message.contains("instanceType is missing") && message.contains("set instanceTypes"),
        "{message}"
    );
    harness.finish().await;
    Ok(())
}
