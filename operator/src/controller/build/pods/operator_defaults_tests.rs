//! Tests of what the operator's own settings add to every benchmark pod: the default
//! tolerations and node labels under the spec's placement, the autoscaler annotations, the
//! engine mirror, and the pods' sizes.

use k8s_openapi::api::core::v1::Pod;

use super::tests::benchmark;
use super::*;
use crate::controller::build::engine_registry::EngineRegistry;
use crate::controller::build::pod_defaults::{parse_node_selector, parse_tolerations};
use crate::crd::{EngineKind, EngineSpec};

const TAINT: &str = r#"[{"key":"membench.io/benchmark","operator":"Equal","value":"true","effect":"NoSchedule"},{"key":"dedicated","operator":"Exists","effect":"NoSchedule"}]"#;

fn operator_defaults() -> PodSettings {
    PodSettings {
        tolerations: parse_tolerations(TAINT, false).unwrap(),
        node_selector: parse_node_selector(&[
            "membench.io/pool=benchmarks".into(),
            "team=perf".into(),
        ])
        .unwrap(),
        ..Default::default()
    }
}

/// Run 0's engine pod and its first client pod.
fn both_pods(b: &MemoryBenchmark, settings: &PodSettings) -> [Pod; 2] {
    let plans = crate::validation::validate(b).unwrap().plans;
    [
        engine_pod(b, 0, 512 << 20, None, settings),
        client_pod(b, 0, 1, &plans, "127.1.0.5", settings),
    ]
}

fn toleration_keys(pod: &Pod) -> Vec<(String, String)> {
    pod.spec
        .as_ref()
        .unwrap()
        .tolerations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default()))
        .collect()
}

#[test]
fn every_engine_and_client_pod_gets_the_operators_tolerations_and_node_labels() {
    let b = benchmark("");
    for pod in both_pods(&b, &operator_defaults()) {
        let name = pod.metadata.name.clone().unwrap();
        assert_eq!(
            toleration_keys(&pod),
            [
                ("membench.io/benchmark".to_string(), "true".to_string()),
                ("dedicated".to_string(), String::new())
            ],
            "{name}"
        );
        let selector = pod.spec.unwrap().node_selector.unwrap();
        assert_eq!(selector["membench.io/pool"], "benchmarks", "{name}");
        assert_eq!(selector["team"], "perf", "{name}");
        assert_eq!(selector[INSTANCE_TYPE_LABEL], "r8g.4xlarge", "{name}");
    }
    // Without operator defaults the pods keep only what the spec says.
    for pod in both_pods(&b, &PodSettings::default()) {
        assert_eq!(pod.spec.as_ref().unwrap().tolerations, None);
        assert_eq!(
            pod.spec
                .unwrap()
                .node_selector
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            [INSTANCE_TYPE_LABEL]
        );
    }
}

#[test]
fn the_specs_placement_wins_on_the_same_toleration_key_and_label_key() {
    let b = benchmark(
        "  placement:\n    nodeSelector: {team: storage}\n    tolerations: [{key: membench.io/benchmark, operator: Equal, value: graviton, effect: NoSchedule}]\n",
    );
    for pod in both_pods(&b, &operator_defaults()) {
        let name = pod.metadata.name.clone().unwrap();
        assert_eq!(
            toleration_keys(&pod),
            [
                ("dedicated".to_string(), String::new()),
                ("membench.io/benchmark".to_string(), "graviton".to_string())
            ],
            "{name}"
        );
        let selector = pod.spec.unwrap().node_selector.unwrap();
        assert_eq!(selector["team"], "storage", "{name}");
        assert_eq!(selector["membench.io/pool"], "benchmarks", "{name}");
    }
}

#[test]
fn engine_and_client_pods_ask_autoscalers_to_leave_their_node_alone() {
    let b = benchmark("");
    for pod in both_pods(&b, &PodSettings::default()) {
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let name = pod.metadata.name.unwrap();
        assert_eq!(
            annotations
                .get(ANNOTATION_DO_NOT_DISRUPT)
                .map(String::as_str),
            Some("true"),
            "{name}"
        );
        assert_eq!(
            annotations
                .get(ANNOTATION_SAFE_TO_EVICT)
                .map(String::as_str),
            Some("false"),
            "{name}"
        );
    }
    // The client keeps the annotation that makes it the operator's own.
    let [_, client] = both_pods(&b, &PodSettings::default());
    assert!(owned_by(&client, &b));
}

#[test]
fn the_engine_mirror_replaces_the_official_image_and_an_entrys_own_image_stays() {
    let mut b = benchmark("");
    b.spec.engines = vec![
        EngineSpec::new(EngineKind::Redis, "8.2.3"),
        EngineSpec {
            image: Some("registry.example.com/team/valkey:custom".into()),
            ..EngineSpec::new(EngineKind::Valkey, "9.1.2")
        },
        EngineSpec::new(EngineKind::Dragonfly, "1.40.0"),
    ];
    let settings = PodSettings {
        engine_registry: Some(EngineRegistry::parse("mirror.example.com:5000/hub").unwrap()),
        ..Default::default()
    };
    let image = |index: usize, settings: &PodSettings| {
        engine_pod(&b, index, 1 << 30, None, settings)
            .spec
            .unwrap()
            .containers[0]
            .image
            .clone()
            .unwrap()
    };
    assert_eq!(
        image(0, &settings),
        "mirror.example.com:5000/hub/library/redis:8.2.3"
    );
    assert_eq!(
        image(1, &settings),
        "registry.example.com/team/valkey:custom"
    );
    assert_eq!(
        image(2, &settings),
        "mirror.example.com:5000/hub/dragonflydb/dragonfly:v1.40.0"
    );
    assert_eq!(image(0, &PodSettings::default()), "redis:8.2.3");
}

#[test]
fn pod_resources_size_the_engine_cpu_and_the_client() {
    let resources = |pod: &Pod| {
        let limits = pod.spec.as_ref().unwrap().containers[0]
            .resources
            .clone()
            .unwrap()
            .limits
            .unwrap();
        (limits["cpu"].0.clone(), limits["memory"].0.clone())
    };
    let defaults = benchmark("");
    let [engine, client] = both_pods(&defaults, &PodSettings::default());
    assert_eq!(resources(&engine), ("2".to_string(), "512Mi".to_string()));
    assert_eq!(resources(&client), ("1".to_string(), "256Mi".to_string()));
    let sized =
        benchmark("  podResources: {engineCpu: \"4\", clientCpu: 500m, clientMemory: 512Mi}\n");
    let [engine, client] = both_pods(&sized, &PodSettings::default());
    assert_eq!(resources(&engine), ("4".to_string(), "512Mi".to_string()));
    assert_eq!(
        resources(&client),
        ("500m".to_string(), "512Mi".to_string())
    );
    // A field left out takes the schema's default.
    let partly = benchmark("  podResources: {clientMemory: 1Gi}\n");
    let [engine, client] = both_pods(&partly, &PodSettings::default());
    assert_eq!(resources(&engine).0, "2");
    assert_eq!(resources(&client), ("1".to_string(), "1Gi".to_string()));
}
