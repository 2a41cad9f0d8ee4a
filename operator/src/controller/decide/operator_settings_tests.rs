//! The decision under the operator's own settings: pods that cannot fit the instance type are
//! DoesNotFit before any pod, and the engine mirror is what the status and the policy see.

use super::conditions::FAILED;
use super::observation::Observation;
use super::plan::plan;
use super::pod_fit::NodeAllocatable;
use super::test_fixtures::*;
use crate::controller::build::engine_registry::EngineRegistry;
use crate::crd::{ConditionReason, Phase};

const GIB: u64 = 1 << 30;

#[test]
fn pods_larger_than_the_instance_type_do_not_fit_before_any_pod_naming_both_figures() {
    // r8g.4xlarge gives pods 125.14 GiB: 130Gi and the client's 256Mi do not fit.
    let mut b = fresh_benchmark("  podResources: {engineCpu: \"2\"}\n");
    b.spec.engines.truncate(1);
    b.spec.engines[0].memory = Some("130Gi".into());
    let first = reconcile(&mut b, &[], 0, None);
    assert!(first.create.is_empty());
    let again = reconcile(&mut b, &[], 5, None);
    assert!(again.create.is_empty(), "no pod for a spec that cannot fit");
    let status = b.status.clone().unwrap();
    assert_eq!(status.phase, Some(Phase::Failed));
    let failed = condition(&b, FAILED);
    assert_eq!(failed.reason, ConditionReason::DoesNotFit);
    assert!(
        failed
            .message
            .contains("need 3 CPU and 130.25 GiB on one node")
            && failed
                .message
                .contains("gives pods 15.89 CPU and 125.14 GiB")
            && failed.message.contains("spec.engines[0].memory 130Gi"),
        "{}",
        failed.message
    );
}

#[test]
fn a_node_of_the_type_decides_the_fit_and_only_before_the_first_pod() {
    let mut b = benchmark("");
    b.spec.engines[0].memory = Some("8Gi".into());
    b.spec.engines[1].memory = Some("8Gi".into());
    let small = [NodeAllocatable {
        node: "r8g-small".into(),
        instance_type: "r8g.4xlarge".into(),
        cpu_millis: 2500,
        memory_bytes: 4 * GIB,
    }];
    let observe =
        |b: &crate::crd::MemoryBenchmark, pods: &[k8s_openapi::api::core::v1::Pod], nodes| {
            plan(
                &Observation {
                    benchmark: b,
                    pods,
                    now: at(5),
                    load: None,
                    rejected: &[],
                    served: &[],
                    others: &[],
                    prices: None,
                    nodes,
                },
                &settings(),
            )
        };
    let refused = observe(&b, &[], &small);
    assert!(refused.create.is_empty());
    let message = refused
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == FAILED)
        .map(|c| c.message.clone())
        .unwrap();
    assert!(
        message.contains(
            "node r8g-small of instance type r8g.4xlarge gives pods 2.5 CPU and 4.00 GiB"
        ),
        "{message}"
    );
    // Without that node the table's figures let it start; once its pod exists, a small node
    // joining later changes nothing.
    let started = observe(&b, &[], &[]);
    assert_eq!(started.create.len(), 1);
    let pod = created(started.create[0].clone(), 5);
    b.status = Some(started.status);
    let running = observe(&b, &[pod], &small);
    assert_ne!(running.status.phase, Some(Phase::Failed));
}

#[test]
fn the_engine_mirror_is_in_the_status_and_must_be_allowed() {
    let registry = EngineRegistry::parse("mirror.example.com/hub").unwrap();
    let mut allowed = settings();
    allowed.pods.engine_registry = Some(registry.clone());
    allowed
        .policy
        .allowed_images
        .extend(registry.allowed_patterns());
    let mut b = fresh_benchmark("");
    b.spec.engines[1].image = Some("valkey/valkey:9.1.2".into());
    let observation = Observation {
        benchmark: &b,
        pods: &[],
        now: at(0),
        load: None,
        rejected: &[],
        served: &[],
        others: &[],
        prices: None,
        nodes: &[],
    };
    let status = plan(&observation, &allowed).status;
    assert_eq!(
        status.engines[0].image.as_deref(),
        Some("mirror.example.com/hub/library/redis:7.0.15")
    );
    assert_eq!(
        status.engines[0].engine_registry.as_deref(),
        Some("mirror.example.com/hub")
    );
    assert_eq!(
        status.engines[1].image.as_deref(),
        Some("valkey/valkey:9.1.2")
    );
    assert_eq!(status.engines[1].engine_registry, None);
    // A mirror outside the allowlist is refused, naming it.
    let mut not_allowed = settings();
    not_allowed.pods.engine_registry = Some(registry);
    let refused = plan(&observation, &not_allowed).status;
    let failed = refused
        .conditions
        .iter()
        .find(|c| c.type_ == FAILED)
        .unwrap();
    assert!(
        failed.message.contains("engineRegistry")
            && failed
                .message
                .contains("mirror.example.com/hub/library/redis:7.0.15"),
        "{}",
        failed.message
    );
}
