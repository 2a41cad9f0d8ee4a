//! The NetworkPolicy of a benchmark: created before its first pod, owned by the benchmark (so
//! the garbage collector deletes it with it), it closes the benchmark's pods to everything but
//! what a measurement needs:
//!
//! - the engine takes connections on 6379 from this benchmark's client pods only;
//! - the client takes connections on its progress port from the operator only;
//! - the pods reach nothing but this benchmark's engine on 6379 (no DNS: the client connects
//!   to the engine's pod IP);
//! - with a sharded entry (`engines[].shards`), the engines also reach each other, and only
//!   each other, on the cluster bus (16379), where the shards of a run gossip; the client
//!   reaches every shard on 6379 by the rules above;
//! - with `spec.peak.replica`, the engines also take 6379 from the benchmark's replica pods
//!   (engine pods labelled `membench.io/role=replica`), which connect to the engine they copy;
//!   the client reaches the replica, an engine pod, by the rules above.
//!
//! So no other pod in the cluster can write into an engine and skew its figures, or reach an
//! engine old enough to allow `CONFIG SET dir` or `MODULE LOAD`. A network plugin that enforces
//! NetworkPolicy is needed for any of this to hold (the dev cluster has none: its tests check
//! the object). Pure builder and [`classify_existing`]; `write::network_policy::ensure` puts the
//! policy in place (replacing one left by an earlier benchmark of the same name).

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::client::pod_io::progress_endpoint::PROGRESS_PORT;
use crate::crd::MemoryBenchmark;

use super::pods::{
    APP_NAME, CLUSTER_BUS_PORT, Component, ENGINE_PORT, LABEL_BENCHMARK, LABEL_COMPONENT,
    LABEL_MANAGED_BY, LABEL_NAME, LABEL_ROLE, MANAGER, ROLE_REPLICA, benchmark_object_metadata,
};

/// The namespace label every namespace carries (Kubernetes sets it).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Where the operator runs, for the rule that lets it read progress.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkPolicySettings {
    /// Create a NetworkPolicy per benchmark (`--benchmark-network-policies`).
    pub enabled: bool,
    /// The operator's namespace (`MEMBENCH_NAMESPACE`, from the downward API in the chart);
    /// `None` when it runs outside the cluster: then any namespace's operator pods match.
    pub operator_namespace: Option<String>,
    /// Labels of the operator's pods (`--operator-pod-labels`).
    pub operator_pod_labels: BTreeMap<String, String>,
}

impl Default for NetworkPolicySettings {
    fn default() -> Self {
        Self {
            enabled: true,
            operator_namespace: None,
            operator_pod_labels: [
                (LABEL_NAME.to_string(), APP_NAME.to_string()),
                (LABEL_COMPONENT.to_string(), "operator".to_string()),
            ]
            .into(),
        }
    }
}

/// The policy's name: the benchmark's own (another kind, so no clash with anything).
pub fn network_policy_name(benchmark: &MemoryBenchmark) -> String {
    benchmark.name_any()
}

fn selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn tcp(port: i32) -> Vec<NetworkPolicyPort> {
    vec![NetworkPolicyPort {
        port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..Default::default()
    }]
}

/// The benchmark's NetworkPolicy (see the module documentation).
pub fn network_policy(
    benchmark: &MemoryBenchmark,
    settings: &NetworkPolicySettings,
) -> NetworkPolicy {
    let name = benchmark.name_any();
    let of_benchmark = |component: Option<Component>| {
        let mut labels = vec![(LABEL_NAME, APP_NAME), (LABEL_BENCHMARK, name.as_str())];
        if let Some(component) = component {
            labels.push((LABEL_COMPONENT, component.as_str()));
        }
        selector(&labels)
    };
    let operator = NetworkPolicyPeer {
        namespace_selector: Some(match &settings.operator_namespace {
            Some(namespace) => selector(&[(NAMESPACE_NAME_LABEL, namespace)]),
            None => LabelSelector::default(),
        }),
        pod_selector: Some(LabelSelector {
            match_labels: Some(settings.operator_pod_labels.clone()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let engines = || {
        Some(vec![NetworkPolicyPeer {
            pod_selector: Some(of_benchmark(Some(Component::Engine))),
            ..Default::default()
        }])
    };
    let mut ingress = vec![
        NetworkPolicyIngressRule {
            from: Some(vec![NetworkPolicyPeer {
                pod_selector: Some(of_benchmark(Some(Component::Client))),
                ..Default::default()
            }]),
            ports: Some(tcp(ENGINE_PORT)),
        },
        NetworkPolicyIngressRule {
            from: Some(vec![operator]),
            ports: Some(tcp(PROGRESS_PORT.into())),
        },
    ];
    let mut egress = vec![NetworkPolicyEgressRule {
        to: engines(),
        ports: Some(tcp(ENGINE_PORT)),
    }];
    // The shards of a sharded run gossip over the cluster bus, to each other only.
    if benchmark.spec.engines.iter().any(|e| e.shards.is_some()) {
        ingress.push(NetworkPolicyIngressRule {
            from: engines(),
            ports: Some(tcp(CLUSTER_BUS_PORT)),
        });
        egress.push(NetworkPolicyEgressRule {
            to: engines(),
            ports: Some(tcp(CLUSTER_BUS_PORT)),
        });
    }
    // A replica connects to the engine it copies (REPLICAOF) and takes the sync over that
    // connection; its egress to the engines on 6379 is the rule every pod has.
    if benchmark
        .spec
        .peak
        .as_ref()
        .is_some_and(|p| p.replica.is_some())
    {
        ingress.push(NetworkPolicyIngressRule {
            from: Some(vec![NetworkPolicyPeer {
                pod_selector: Some(selector(&[
                    (LABEL_NAME, APP_NAME),
                    (LABEL_BENCHMARK, name.as_str()),
                    (LABEL_COMPONENT, Component::Engine.as_str()),
                    (LABEL_ROLE, ROLE_REPLICA),
                ])),
                ..Default::default()
            }]),
            ports: Some(tcp(ENGINE_PORT)),
        });
    }
    NetworkPolicy {
        metadata: benchmark_object_metadata(benchmark, network_policy_name(benchmark)),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(of_benchmark(None)),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(ingress),
            egress: Some(egress),
        }),
    }
}

/// What a NetworkPolicy found under the benchmark's policy name is to this benchmark.
#[derive(Debug, PartialEq)]
pub enum ExistingPolicy {
    /// Controlled by this benchmark (same UID): nothing to do.
    Ours,
    /// Made by membench for an earlier benchmark of the same name (another UID, or its owner
    /// reference removed by an orphaning delete). Kept, it would not be this benchmark's: the
    /// garbage collector deletes it once its owner is gone, and this benchmark's pods would
    /// then run open. Its UID, for a delete on the condition that it is still that object.
    Stale(String),
    /// Not made by membench: never touched.
    Foreign,
}

/// Classifies a NetworkPolicy found where the benchmark's must be.
pub fn classify_existing(existing: &NetworkPolicy, benchmark: &MemoryBenchmark) -> ExistingPolicy {
    let controlled_by_benchmark = match benchmark.uid() {
        Some(uid) => existing
            .owner_references()
            .iter()
            .any(|r| r.controller == Some(true) && r.uid == uid),
        None => false,
    };
    if controlled_by_benchmark {
        return ExistingPolicy::Ours;
    }
    let made_by_membench =
        existing.labels().get(LABEL_MANAGED_BY).map(String::as_str) == Some(MANAGER);
    match (made_by_membench, existing.uid()) {
        (true, Some(uid)) => ExistingPolicy::Stale(uid),
        _ => ExistingPolicy::Foreign,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::Resource;

    fn benchmark() -> MemoryBenchmark {
        let mut b = crate::validation::spec_file::parse_specs(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: zset, namespace: bench}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{engine: redis, version: \"7.0.15\"}]\n  workload: {sortedSet: {members: 1000}}\n",
        )
        .unwrap()
        .remove(0);
        b.metadata.uid = Some("uid-1".into());
        b
    }

    #[test]
    fn only_the_benchmarks_client_reaches_its_engine_and_only_the_operator_its_client() {
        let settings = NetworkPolicySettings {
            operator_namespace: Some("membench-system".into()),
            ..Default::default()
        };
        let policy = network_policy(&benchmark(), &settings);
        let value = serde_json::to_value(&policy).unwrap();
        let spec = &value["spec"];
        assert_eq!(
            spec["podSelector"]["matchLabels"],
            serde_json::json!({"app.kubernetes.io/name": "membench", "membench.io/benchmark": "zset"})
        );
        assert_eq!(
            spec["policyTypes"],
            serde_json::json!(["Ingress", "Egress"])
        );
        let engine_rule = &spec["ingress"][0];
        assert_eq!(
            engine_rule["ports"],
            serde_json::json!([{"port": 6379, "protocol": "TCP"}])
        );
        assert_eq!(
            engine_rule["from"],
            serde_json::json!([{"podSelector": {"matchLabels": {
                "app.kubernetes.io/name": "membench", "membench.io/benchmark": "zset",
                "app.kubernetes.io/component": "client"}}}])
        );
        let progress_rule = &spec["ingress"][1];
        assert_eq!(progress_rule["ports"][0]["port"], 9121);
        assert_eq!(
            progress_rule["from"][0]["namespaceSelector"]["matchLabels"],
            serde_json::json!({"kubernetes.io/metadata.name": "membench-system"})
        );
        assert_eq!(
            progress_rule["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
            "operator"
        );
        assert_eq!(spec["egress"].as_array().unwrap().len(), 1);
        assert_eq!(
            spec["egress"][0]["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
            "engine"
        );
        let owner = &policy.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            ("uid-1", Some(true))
        );
    }

    fn found(labels: &[(&str, &str)], controller_uid: Option<&str>) -> NetworkPolicy {
        NetworkPolicy {
            metadata: ObjectMeta {
                name: Some("zset".into()),
                uid: Some("policy-uid".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                owner_references: controller_uid.map(|uid| {
                    let mut owner = benchmark().controller_owner_ref(&()).unwrap();
                    owner.uid = uid.into();
                    vec![owner]
                }),
                ..Default::default()
            },
            spec: None,
        }
    }

    #[test]
    fn a_policy_controlled_by_the_benchmark_is_its_own() {
        let policy = found(&[(LABEL_MANAGED_BY, MANAGER)], Some("uid-1"));
        assert_eq!(
            classify_existing(&policy, &benchmark()),
            ExistingPolicy::Ours
        );
    }

    #[test]
    fn membenchs_policy_of_an_earlier_benchmark_of_the_same_name_is_stale() {
        // Owned by the deleted benchmark (another UID), or orphaned (no owner at all).
        for owner in [Some("uid-of-the-deleted-one"), None] {
            let policy = found(&[(LABEL_MANAGED_BY, MANAGER)], owner);
            assert_eq!(
                classify_existing(&policy, &benchmark()),
                ExistingPolicy::Stale("policy-uid".into()),
                "owner {owner:?}"
            );
        }
    }

    #[test]
    fn a_policy_membench_did_not_make_is_never_replaced() {
        for labels in [&[][..], &[(LABEL_MANAGED_BY, "someone-else")][..]] {
            let policy = found(labels, None);
            assert_eq!(
                classify_existing(&policy, &benchmark()),
                ExistingPolicy::Foreign,
                "labels {labels:?}"
            );
        }
    }
}
