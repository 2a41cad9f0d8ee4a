//! The decision facing input it did not write: client pods that copy the operator's labels,
//! and termination messages that break the bounds of a result.

use kube::ResourceExt;

use super::test_fixtures::*;
use crate::controller::build::pods::ANNOTATION_CLIENT_OF;
use crate::crd::ConditionReason;

/// Engine 0 ready, its client created: the benchmark and the two pods.
fn client_started() -> (
    crate::crd::MemoryBenchmark,
    k8s_openapi::api::core::v1::Pod,
    k8s_openapi::api::core::v1::Pod,
) {
    let mut b = benchmark("");
    let engine = first_engine_ready(&mut b, 0);
    let client = client_created(&mut b, &engine, 5);
    (b, engine, client)
}

#[test]
fn a_forged_result_with_more_repetitions_than_asked_fails_the_engine_as_invalid_client_result() {
    let (mut b, engine, client) = client_started();
    // A result claiming four billion repetitions of one value: never expanded.
    let forged = r#"{"engine":{"name":"redis","version":"7.0.15","allocator":"","arch":""},"commands":1,"repetitions":{"n":4294967295,"baseline":[1],"used":[2],"rss":[3],"items":[4],"micros":[5]}}"#;
    let client = terminated(client, "r8g-1", 0, "Completed", forged, 20);
    reconcile(&mut b, &[engine, client], 21, None);
    let status = b.status.as_ref().unwrap();
    let first = &status.engines[0];
    assert_eq!(first.state, "Failed");
    assert_eq!(first.reason, Some(ConditionReason::InvalidClientResult));
    let message = first.message.clone().unwrap();
    assert!(message.contains("more than the 3 asked for"), "{message}");
    assert!(
        message.contains(r#"the message began: {"engine""#),
        "{message}"
    );
    assert!(
        first.repetitions.is_empty(),
        "nothing of a refused result is kept"
    );
    // Not retried: a second client would be read the same way.
    assert_eq!(first.client_attempts, 1);
    // The next engine runs.
    assert_eq!(status.engines[1].state, "Pending");
}

#[test]
fn a_refused_result_quotes_at_most_the_first_200_bytes() {
    let (mut b, engine, client) = client_started();
    let forged = format!("{{\"engine\":\"{}\"}}", "A".repeat(5000));
    let client = terminated(client, "r8g-1", 0, "Completed", &forged, 20);
    reconcile(&mut b, &[engine, client], 21, None);
    let first = &b.status.as_ref().unwrap().engines[0];
    assert_eq!(first.reason, Some(ConditionReason::InvalidClientResult));
    let message = first.message.clone().unwrap();
    let quoted = message.split("the message began: ").nth(1).unwrap();
    assert!(
        quoted.len() <= 200 + "…".len(),
        "{} bytes quoted",
        quoted.len()
    );
}

#[test]
fn a_pod_copying_the_client_labels_without_the_operators_annotation_is_not_read() {
    let (mut b, engine, client) = client_started();
    let mut forged = terminated(
        client,
        "r8g-1",
        0,
        "Completed",
        &result_message("redis", "7.0.15", 1.0, 3, None),
        20,
    );
    forged.annotations_mut().remove(ANNOTATION_CLIENT_OF);
    reconcile(&mut b, &[engine, forged], 21, None);
    let first = &b.status.as_ref().unwrap().engines[0];
    assert!(first.repetitions.is_empty(), "{first:#?}");
    assert_ne!(first.state, "Succeeded");
}

#[test]
fn a_spec_the_operators_policy_refuses_is_policy_denied_and_creates_nothing() {
    let mut b = fresh_benchmark("  placement:\n    tolerations: [{operator: Exists}]\n");
    let plan = reconcile(&mut b, &[], 0, None);
    assert!(plan.create.is_empty());
    let failed = condition(&b, "Failed");
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", "PolicyDenied")
    );
    assert!(
        failed.message.contains("allowTolerateEverything"),
        "{}",
        failed.message
    );
}
