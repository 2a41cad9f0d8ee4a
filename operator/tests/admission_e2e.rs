//! Admission on the dev cluster's real API server: what the CRD rejects before a benchmark
//! exists, and what becomes of a benchmark whose pods the API server refuses (Pod Security, a
//! ResourceQuota, the pod API's own validation) or cannot admit at all (a webhook that cannot be
//! reached), or admits as a platform's policy changed them into pods no node can create (a
//! seccomp profile the nodes lack). The operator runs in-process, one per test, each watching
//! its own namespace.

mod common;

use std::time::{Duration, Instant};

use anyhow::Context as _;
use common::operator::*;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use membench::crd::{MemoryBenchmark, Phase};

/// A spec with a field changed from a valid one, the field the API server must name, and words
/// of the rule's message.
struct BadSpec {
    replace: &'static str,
    with: &'static str,
    field: &'static str,
    words: &'static str,
}

const VALID: &str = "  instanceType: r8g.4xlarge\n  engines: [{engine: redis, version: \"7.0.15\", image: \"redis:7.0.15\", memory: 1Gi}]\n  workload: {sortedSet: {members: 1000000, sampleEvery: 100000}}\n  placement:\n    nodeSelector: {pool: bench}\n    tolerations: [{key: dedicated, operator: Equal, value: bench, effect: NoSchedule}]\n";

const BAD_SPECS: &[BadSpec] = &[
    BadSpec {
        replace: "instanceType: r8g.4xlarge",
        with: "instanceType: r8g.4xlarge\n  instanceTypes: [r7i.4xlarge]",
        field: "spec",
        words: "set instanceType (one instance type) or instanceTypes (several), not both",
    },
    BadSpec {
        replace: "instanceType: r8g.4xlarge",
        with: "instanceTypes: [r8g.4xlarge, r7i.4xlarge, r8g.4xlarge]",
        field: "spec.instanceTypes",
        words: "lists an instance type twice",
    },
    BadSpec {
        replace: "instanceType: r8g.4xlarge",
        with: "instanceTypes: [\"r8g 4xlarge\"]",
        field: "spec.instanceTypes",
        words: "must be a node label value",
    },
    BadSpec {
        replace: "instanceType: r8g.4xlarge",
        with: "instanceType: r8g.4xlarge\n  parallelism: 0",
        field: "spec.parallelism",
        words: "greater than or equal to 1",
    },
    BadSpec {
        replace: "instanceType: r8g.4xlarge",
        with: "instanceType: \"r8g 4xlarge\"",
        field: "spec.instanceType",
        words: "must be a node label value",
    },
    BadSpec {
        replace: "image: \"redis:7.0.15\"",
        with: "image: \"Redis:7.0 latest\"",
        field: "spec.engines[0].image",
        words: "must be an image reference",
    },
    BadSpec {
        replace: "memory: 1Gi",
        with: "memory: plenty",
        field: "spec.engines[0].memory",
        words: "must be a memory quantity",
    },
    BadSpec {
        replace: "memory: 1Gi",
        with: "memory: 8Mi",
        field: "spec.engines[0].memory",
        words: "at least 16Mi",
    },
    BadSpec {
        replace: "nodeSelector: {pool: bench}",
        with: "nodeSelector: {\"pool name\": bench}",
        field: "spec.placement.nodeSelector",
        words: "keys must be label keys",
    },
    BadSpec {
        replace: "nodeSelector: {pool: bench}",
        with: "nodeSelector: {pool: \"bench pool\"}",
        field: "spec.placement.nodeSelector",
        words: "values must be label values",
    },
    BadSpec {
        replace: "operator: Equal",
        with: "operator: Lt",
        field: "spec.placement.tolerations[0].operator",
        words: "supported values: \"Equal\", \"Exists\"",
    },
    BadSpec {
        replace: "effect: NoSchedule",
        with: "effect: NoSchedul",
        field: "spec.placement.tolerations[0].effect",
        words: "supported values",
    },
    BadSpec {
        replace: "key: dedicated, operator: Equal",
        with: "operator: Equal",
        field: "spec.placement.tolerations[0].operator",
        words: "without a key must have operator Exists",
    },
    BadSpec {
        replace: "operator: Equal, value: bench",
        with: "operator: Exists, value: bench",
        field: "spec.placement.tolerations[0].value",
        words: "operator Exists must not have a value",
    },
    BadSpec {
        replace: "effect: NoSchedule",
        with: "effect: NoSchedule, tolerationSeconds: 30",
        field: "spec.placement.tolerations[0].effect",
        words: "tolerationSeconds needs effect NoExecute",
    },
    BadSpec {
        replace: "key: dedicated,",
        with: "key: \"dedicated pool\",",
        field: "spec.placement.tolerations[0].key",
        words: "must be a label key",
    },
    BadSpec {
        replace: "value: bench,",
        with: "value: \"bench pool\",",
        field: "spec.placement.tolerations[0].value",
        words: "must be a label value",
    },
    BadSpec {
        replace: "sampleEvery: 100000",
        with: "sampleEvery: 10",
        field: "spec.workload.sortedSet.sampleEvery",
        words: "0 (no growth curve) or at least 1000",
    },
    BadSpec {
        replace: "members: 1000000, sampleEvery: 100000",
        with: "members: 2000000000, sampleEvery: 1000",
        field: "spec.workload.sortedSet",
        words: "at most 100000 readings per repetition",
    },
    BadSpec {
        replace: "memory: 1Gi",
        with: "memory: 1Gi, config: {dir: tmp}",
        field: "spec.engines[0].config",
        words: "config sets dir, which is not a memory-relevant setting membench lets a benchmark change for redis",
    },
    BadSpec {
        replace: "memory: 1Gi",
        with: "memory: 1Gi, config: {hash-max-listpack-entries: \"5 12\"}",
        field: "spec.engines[0].config",
        words: "values are numbers and words",
    },
    BadSpec {
        replace: "engine: redis, version",
        with: "engine: dragonfly, config: {hash-max-listpack-entries: \"0\"}, version",
        field: "spec.engines[0].config",
        words: "config sets hash-max-listpack-entries, which is not a memory-relevant setting membench lets a benchmark change for dragonfly",
    },
    BadSpec {
        replace: "  placement:\n",
        with: "  podResources: {engineCpu: two}\n  placement:\n",
        field: "spec.podResources.engineCpu",
        words: "CPU must be a CPU quantity such as 2, 1.5 or 500m",
    },
    BadSpec {
        replace: "  placement:\n",
        with: "  podResources: {clientCpu: \"0\"}\n  placement:\n",
        field: "spec.podResources.clientCpu",
        words: "CPU must be more than 0",
    },
    BadSpec {
        replace: "  placement:\n",
        with: "  podResources: {clientMemory: 8Mi}\n  placement:\n",
        field: "spec.podResources.clientMemory",
        words: "clientMemory must be at least 16Mi",
    },
    BadSpec {
        replace: "sampleEvery: 100000}",
        with: "sampleEvery: 100000, ttlSeconds: 10}",
        field: "spec.workload.sortedSet.ttlSeconds",
        words: "greater than or equal to 60",
    },
    BadSpec {
        replace: "sampleEvery: 100000}",
        with: "sampleEvery: 100000, ttlShare: 0.5}",
        field: "spec.workload.sortedSet.ttlShare",
        words: "ttlShare applies only with ttlSeconds",
    },
];

/// A sharded Valkey benchmark the CRD admits, and what it must refuse of it.
const VALID_SHARDED: &str = "  instanceType: r8g.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\", shards: 3, memory: 1Gi}]\n  workload: {strings: {keys: 1000}}\n";

const BAD_SHARDED_SPECS: &[BadSpec] = &[
    BadSpec {
        replace: "shards: 3",
        with: "shards: 1",
        field: "spec.engines[0].shards",
        words: "shards must be between 2 and 16",
    },
    BadSpec {
        replace: "shards: 3",
        with: "shards: 17",
        field: "spec.engines[0].shards",
        words: "shards must be between 2 and 16",
    },
    BadSpec {
        replace: "shards: 3",
        with: "shards: 3, clusterMode: false",
        field: "spec.engines[0].clusterMode",
        words: "clusterMode: false contradicts it",
    },
    BadSpec {
        replace: "engine: valkey, version: \"9.1.2\"",
        with: "engine: dragonfly, version: \"1.34.2\"",
        field: "spec.engines[0].shards",
        words: "Dragonfly has no multi-node cluster membench can join",
    },
    BadSpec {
        replace: "workload: {strings: {keys: 1000}}",
        with: "workload: {sortedSet: {members: 1000}}",
        field: "spec.engines",
        words: "a sorted set is one key, so all of it lands on one shard",
    },
    BadSpec {
        replace: "{keys: 1000}",
        with: "{keys: 1000, ttlShare: 0.5}",
        field: "spec.workload.strings.ttlShare",
        words: "ttlShare applies only with ttlSeconds",
    },
];

/// Creates (dry run) `valid`, which must be admitted, then each of `bad` made of it, which must
/// be refused naming its field with its words; returns what was not.
async fn refusals_missing(
    api: &Api<MemoryBenchmark>,
    valid: &str,
    bad: &[BadSpec],
) -> anyhow::Result<Vec<String>> {
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let benchmark: MemoryBenchmark = serde_saphyr::from_str(&spec("valid", valid))?;
    api.create(&dry_run, &benchmark)
        .await
        .map_err(|e| anyhow::anyhow!("the valid spec is refused: {e}"))?;
    let mut failures = Vec::new();
    for bad in bad {
        anyhow::ensure!(valid.contains(bad.replace), "{}", bad.replace);
        let yaml = spec("bad", &valid.replace(bad.replace, bad.with));
        // Untyped: `clusterMode: false` must reach the API server as written (the typed spec
        // would drop a false clusterMode when it is serialized).
        let benchmark: serde_json::Value = serde_saphyr::from_str(&yaml)?;
        let benchmark: kube::api::DynamicObject = serde_json::from_value(benchmark)?;
        let resource = kube::api::ApiResource::erase::<MemoryBenchmark>(&());
        let untyped: Api<kube::api::DynamicObject> = Api::namespaced_with(
            api.clone().into_client(),
            api.namespace().unwrap_or_default(),
            &resource,
        );
        match untyped.create(&dry_run, &benchmark).await {
            Ok(_) => failures.push(format!("{}: admitted", bad.with)),
            Err(e) => {
                let text = e.to_string();
                if !(text.contains(bad.field) && text.contains(bad.words)) {
                    failures.push(format!(
                        "{}: expected {} and {:?} in: {text}",
                        bad.with, bad.field, bad.words
                    ));
                }
            }
        }
    }
    Ok(failures)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_refuses_shards_it_cannot_run_naming_the_field() -> anyhow::Result<()> {
    let harness = Harness::without_operator("adm-shards").await?;
    let api = harness.benchmarks();
    let mut failures = refusals_missing(&api, VALID_SHARDED, BAD_SHARDED_SPECS).await?;
    // clusterMode: true beside shards says the same twice, and is admitted.
    let both = VALID_SHARDED.replace("shards: 3", "shards: 3, clusterMode: true");
    let benchmark: MemoryBenchmark = serde_saphyr::from_str(&spec("both", &both))?;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    if let Err(e) = api.create(&dry_run, &benchmark).await {
        failures.push(format!("shards with clusterMode: true: refused: {e}"));
    }
    harness.finish().await;
    anyhow::ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_rejects_each_value_the_pod_api_would_refuse_naming_the_field() -> anyhow::Result<()>
{
    let harness = Harness::start("adm-crd", settings()).await?;
    let api = harness.benchmarks();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let mut failures = refusals_missing(&api, VALID, BAD_SPECS).await?;
    // The name: pods are named after it and labelled with it.
    let long = "n".repeat(49);
    let benchmark: MemoryBenchmark = serde_saphyr::from_str(&spec(&long, VALID))?;
    match api.create(&dry_run, &benchmark).await {
        Ok(_) => failures.push("a 49-character name: admitted".into()),
        Err(e)
            if e.to_string()
                .contains("metadata.name may have at most 48 characters") => {}
        Err(e) => failures.push(format!("a 49-character name: {e}")),
    }
    harness.finish().await;
    anyhow::ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// Waits until a dry-run pod create in the namespace fails with `words`: admission plugins and
/// policies take effect a moment after they are created. The probe pod meets Pod Security
/// `restricted`, so that only what the test set up can refuse it.
async fn until_pods_are_refused(pods: &Api<Pod>, words: &str) -> anyhow::Result<()> {
    until_admission(pods, &format!("refused with {words:?}"), |outcome| {
        outcome
            .as_ref()
            .is_err_and(|e| e.to_string().contains(words))
    })
    .await
}

/// Waits until a probe engine pod, created as a dry run, comes out of admission as `done` says
/// (policies and webhooks take a moment to be in force); the error names `what` and the last
/// outcome.
async fn until_admission(
    pods: &Api<Pod>,
    what: &str,
    done: impl Fn(&Result<Pod, kube::Error>) -> bool,
) -> anyhow::Result<()> {
    let probe: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "admission-probe", "labels": {"app.kubernetes.io/name": "membench", "app.kubernetes.io/component": "engine"}},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "engine",
                "image": "redis:7.0.15",
                "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}
            }]
        }
    }))?;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let outcome = pods.create(&dry_run, &probe).await;
        if done(&outcome) {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "a probe pod is still not {what} after 30 s: {outcome:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Two engines of a small sorted set, for benchmarks whose pods never get to load anything.
const TWO_SMALL_ENGINES: &str = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: redis, version: \"7.0.15\"}\n    - {engine: valkey, version: \"9.1.2\"}\n  workload: {sortedSet: {members: 5000, sampleEvery: 0}}\n";

/// Asserts that every engine of `done` ended with `reason` and a message holding all `words`.
fn each_engine_ended_as(done: &MemoryBenchmark, reason: &str, words: &[&str]) {
    let engines = &done.status.as_ref().expect("a finished status").engines;
    assert!(!engines.is_empty(), "no engines in the status");
    for ended in engines {
        assert_eq!(
            ended.reason.as_ref().map(|r| r.as_str()),
            Some(reason),
            "{ended:#?}"
        );
        let message = ended.message.as_deref().unwrap_or_default();
        for word in words {
            assert!(message.contains(word), "{word:?} not in: {message}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_quota_too_small_for_an_engine_fails_it_as_pod_rejected_and_the_next_runs()
-> anyhow::Result<()> {
    let harness = Harness::start("adm-quota", settings()).await?;
    let quota: ResourceQuota = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "small"},
        "spec": {"hard": {"limits.memory": "1Gi", "requests.memory": "1Gi"}}
    }))?;
    harness
        .namespace
        .api::<ResourceQuota>()
        .create(&PostParams::default(), &quota)
        .await?;
    until_pods_are_refused(&harness.pods(), "exceeded quota").await?;
    // The first engine asks for 2Gi; the second (256Mi) and its client (256Mi) fit in 1Gi.
    let body = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: redis, version: \"7.0.15\", memory: 2Gi}\n    - {engine: valkey, version: \"9.1.2\", memory: 256Mi}\n  workload: {sortedSet: {members: 5000, sampleEvery: 0}}\n  repetitions: 1\n";
    harness.create(&spec("quota", body)).await?;
    let done = harness.finished("quota", Duration::from_secs(120)).await?;
    let (first, second) = (engine(&done, 0), engine(&done, 1));
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("PodRejected"),
        "{first:#?}"
    );
    let message = first.message.unwrap_or_default();
    assert!(
        message.contains("exceeded quota: small") && message.contains("quota-0-engine"),
        "the API server's own message: {message}"
    );
    assert_eq!(second.state, "Succeeded", "{second:#?}");
    assert_eq!(second.repetitions.len(), 1);
    assert_eq!(done.status.unwrap().phase, Some(Phase::Failed));
    let reasons = harness.event_reasons("quota").await?;
    assert!(reasons.iter().any(|r| r == "PodRejected"), "{reasons:?}");
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_value_the_pod_api_refuses_fails_the_engine_as_pod_rejected_at_once()
-> anyhow::Result<()> {
    // The CRD takes placement.affinity as the pod API's own type and does not repeat its
    // validation: an `In` expression without values gets through to the pod API.
    let harness = Harness::start("adm-invalid", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines:\n    - {engine: redis, version: \"7.0.15\"}\n  workload: {sortedSet: {members: 5000, sampleEvery: 0}}\n  placement:\n    affinity:\n      nodeAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: []}]}]\n";
    let started = Instant::now();
    harness.create(&spec("invalid", body)).await?;
    let done = harness.finished("invalid", Duration::from_secs(60)).await?;
    let first = engine(&done, 0);
    assert_eq!(
        first.reason.as_ref().map(|r| r.as_str()),
        Some("PodRejected"),
        "{first:#?}"
    );
    let message = first.message.unwrap_or_default();
    assert!(
        message.contains("must be specified when `operator` is 'In' or 'NotIn'"),
        "{message}"
    );
    let failed = condition(&done, "Failed").unwrap();
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", "PodRejected")
    );
    // At once: not after a retry loop.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    harness.finish().await;
    Ok(())
}

/// A cluster-scoped object a test creates, deleted when dropped (also when the test fails
/// half-way). Each one selects only its test's namespace.
struct ClusterScoped<K>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
    K::DynamicType: Default,
{
    api: Api<K>,
    name: String,
}

impl<K> ClusterScoped<K>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + 'static,
    K::DynamicType: Default,
{
    async fn create(client: &Client, object: serde_json::Value) -> anyhow::Result<Self> {
        let object: K = serde_json::from_value(object)?;
        let api: Api<K> = Api::all(client.clone());
        let created = api.create(&PostParams::default(), &object).await?;
        Ok(ClusterScoped {
            api,
            name: kube::ResourceExt::name_any(&created),
        })
    }
}

impl<K> Drop for ClusterScoped<K>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
    K::DynamicType: Default,
{
    fn drop(&mut self) {
        let (api, name) = (self.api.clone(), self.name.clone());
        finish_in_drop(async move {
            let _ = api.delete(&name, &DeleteParams::default()).await;
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_enforcing_pod_security_restricted_refuses_a_violating_engine_as_pod_rejected()
-> anyhow::Result<()> {
    let harness = Harness::start("adm-psa", settings()).await?;
    let ns = harness.namespace.name().to_string();
    harness
        .label_namespace(&[("pod-security.kubernetes.io/enforce", "restricted")])
        .await?;
    // Whatever securityContext the operator gives its engine pods, a mutating policy in this
    // namespace puts them on the host network, which no Pod Security level allows: the API
    // server's PodSecurity admission refuses them, as it would any pod that breaks the rules.
    let _policy = EnginePodPolicy::create(
        &harness.client,
        &ns,
        "host-network",
        "Object{spec: Object.spec{hostNetwork: true}}",
    )
    .await?;
    until_pods_are_refused(&harness.pods(), "hostNetwork=true").await?;
    harness
        .create(&spec("restricted", TWO_SMALL_ENGINES))
        .await?;
    let done = harness
        .finished("restricted", Duration::from_secs(60))
        .await?;
    each_engine_ended_as(
        &done,
        "PodRejected",
        &[
            "violates PodSecurity \"restricted:latest\"",
            "hostNetwork=true",
        ],
    );
    assert!(
        harness
            .pods()
            .list(&Default::default())
            .await?
            .items
            .is_empty()
    );
    harness.finish().await;
    Ok(())
}

/// A MutatingAdmissionPolicy that applies `apply_expression` to the engine pods created in
/// namespace `ns`, with its binding; both deleted when dropped (the binding first).
struct EnginePodPolicy {
    _binding: ClusterScoped<MutatingAdmissionPolicyBinding>,
    _policy: ClusterScoped<MutatingAdmissionPolicy>,
}

impl EnginePodPolicy {
    async fn create(
        client: &Client,
        ns: &str,
        what: &str,
        apply_expression: &str,
    ) -> anyhow::Result<Self> {
        let name = format!("{ns}-{what}");
        let policy = ClusterScoped::<MutatingAdmissionPolicy>::create(
            client,
            serde_json::json!({
                "metadata": {"name": name},
                "spec": {
                    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
                    "matchConditions": [{"name": "engines-only", "expression": "has(object.metadata.labels) && 'app.kubernetes.io/component' in object.metadata.labels && object.metadata.labels['app.kubernetes.io/component'] == 'engine'"}],
                    "reinvocationPolicy": "Never",
                    "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": apply_expression}}]
                }
            }),
        )
        .await?;
        let binding = ClusterScoped::<MutatingAdmissionPolicyBinding>::create(
            client,
            serde_json::json!({
                "metadata": {"name": name},
                "spec": {
                    "policyName": name,
                    "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
                }
            }),
        )
        .await?;
        Ok(Self {
            _binding: binding,
            _policy: policy,
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seccomp_profile_missing_on_the_node_fails_each_engine_as_create_container_error()
-> anyhow::Result<()> {
    let harness = Harness::start("adm-seccomp", settings()).await?;
    let ns = harness.namespace.name().to_string();
    // A platform's policy puts engine containers under a Localhost seccomp profile that no node
    // has. Pod Security allows Localhost and the API server admits the pods; the node's runtime
    // cannot create the container and the kubelet reports CreateContainerError, retrying for as
    // long as the pod exists. The operator ends each engine with the runtime's message.
    let profile = format!("membench-tests/{ns}-missing.json");
    let _policy = EnginePodPolicy::create(
        &harness.client,
        &ns,
        "seccomp",
        &format!(
            "Object{{spec: Object.spec{{containers: [Object.spec.containers{{name: \"engine\", securityContext: Object.spec.containers.securityContext{{seccompProfile: Object.spec.containers.securityContext.seccompProfile{{type: \"Localhost\", localhostProfile: \"{profile}\"}}}}}}]}}}}"
        ),
    )
    .await?;
    until_admission(&harness.pods(), "the seccomp profile set", |created| {
        created.as_ref().is_ok_and(|pod| {
            let profile_set = pod.spec.as_ref().and_then(|s| {
                s.containers[0]
                    .security_context
                    .as_ref()?
                    .seccomp_profile
                    .as_ref()?
                    .localhost_profile
                    .clone()
            });
            profile_set.as_deref() == Some(profile.as_str())
        })
    })
    .await?;
    harness
        .create(&spec("unconfined", TWO_SMALL_ENGINES))
        .await?;
    let done = harness
        .finished("unconfined", Duration::from_secs(90))
        .await?;
    assert_eq!(done.status.as_ref().unwrap().phase, Some(Phase::Failed));
    each_engine_ended_as(
        &done,
        "CreateContainerError",
        &[
            "the engine container could not be started",
            "cannot load seccomp profile",
            &profile,
        ],
    );
    for failed in &done.status.as_ref().unwrap().engines {
        assert!(failed.repetitions.is_empty(), "{failed:#?}");
    }
    harness
        .pods_gone_within(Duration::from_secs(20))
        .await
        .context("after the benchmark failed")?;
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_seconds_fires_even_when_no_pod_can_ever_be_created() -> anyhow::Result<()> {
    let harness = Harness::start("adm-webhook", settings()).await?;
    let ns = harness.namespace.name().to_string();
    // A webhook that cannot be reached fails every pod create with a server error, which is
    // worth retrying: the operator retries, and only the benchmark's own deadline ends it.
    let webhook = ClusterScoped::<ValidatingWebhookConfiguration>::create(
        &harness.client,
        serde_json::json!({
            "metadata": {"name": format!("{ns}-unreachable")},
            "webhooks": [{
                "name": "unreachable.membench.io",
                "clientConfig": {"url": "https://127.0.0.1:1/validate"},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 2
            }]
        }),
    )
    .await?;
    until_pods_are_refused(&harness.pods(), "failed calling webhook").await?;
    let body = format!("{TWO_SMALL_ENGINES}  timeoutSeconds: 60\n");
    harness.create(&spec("unadmitted", &body)).await?;
    // startedAt is in the status before any pod could be created.
    let pending = harness
        .wait_for("unadmitted", Duration::from_secs(20), "started", |b| {
            b.status.as_ref().is_some_and(|s| s.started_at.is_some())
        })
        .await?;
    assert_eq!(pending.status.unwrap().phase, Some(Phase::Pending));
    let done = harness
        .finished("unadmitted", Duration::from_secs(120))
        .await?;
    assert_eq!(
        engine(&done, 0).reason.as_ref().map(|r| r.as_str()),
        Some("Timeout")
    );
    assert_eq!(
        engine(&done, 1).reason.as_ref().map(|r| r.as_str()),
        Some("NotRun")
    );
    assert!(
        harness
            .pods()
            .list(&Default::default())
            .await?
            .items
            .is_empty()
    );
    drop(webhook);
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_refuses_a_capacity_of_zero_items_or_an_unknown_instance_family()
-> anyhow::Result<()> {
    let harness = Harness::without_operator("adm-capacity").await?;
    // Untyped: an unknown family is refused by membench's own types before it could be sent.
    let resource = kube::api::ApiResource::erase::<MemoryBenchmark>(&());
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(harness.client.clone(), harness.namespace.name(), &resource);
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let with_capacity = |capacity: &str| -> anyhow::Result<kube::api::DynamicObject> {
        Ok(serde_saphyr::from_str(&spec(
            "capacity",
            &format!("{VALID}  capacity: {capacity}\n"),
        ))?)
    };
    api.create(
        &dry_run,
        &with_capacity("{items: 200000000, headroomPercent: 25, instanceFamilies: [r8g, r7i]}")?,
    )
    .await
    .map_err(|e| anyhow::anyhow!("a valid capacity is refused: {e}"))?;
    let mut failures = Vec::new();
    for (capacity, field, words) in [
        (
            "{items: 0}",
            "spec.capacity.items",
            "should be greater than or equal to 1",
        ),
        (
            "{items: 1000, instanceFamilies: [m7g]}",
            "spec.capacity.instanceFamilies[0]",
            "Unsupported value: \"m7g\"",
        ),
        (
            "{items: 1000, headroomPercent: 95}",
            "spec.capacity.headroomPercent",
            "should be less than or equal to 90",
        ),
    ] {
        match api.create(&dry_run, &with_capacity(capacity)?).await {
            Ok(_) => failures.push(format!("{capacity}: admitted")),
            Err(e) => {
                let text = e.to_string();
                if !(text.contains(field) && text.contains(words)) {
                    failures.push(format!(
                        "{capacity}: expected {field} and {words:?} in: {text}"
                    ));
                }
            }
        }
    }
    harness.finish().await;
    anyhow::ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// A benchmark rebuilding an inline profile of three groups whose shares add up to 1 only
/// within rounding (0.7 + 0.2 + 0.1 is 0.9999999999999999 in floating point).
const VALID_PROFILE: &str = "  instanceType: r8g.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\"}]\n  workload:\n    profile:\n      source: {keys: 100}\n      groups:\n      - {template: \"a:{n}\", type: string, share: 0.7, keyLength: {buckets: [[4, 4, 1]]}, values: {textLength: {buckets: [[3, 3, 1]]}}}\n      - {template: \"b:{n}\", type: string, share: 0.2, keyLength: {buckets: [[4, 4, 1]]}, values: {textLength: {buckets: [[3, 3, 1]]}}}\n      - {template: \"c:{n}\", type: string, share: 0.1, keyLength: {buckets: [[4, 4, 1]]}, values: {textLength: {buckets: [[3, 3, 1]]}}}\n";

const BAD_PROFILE_SPECS: &[BadSpec] = &[
    BadSpec {
        replace: "\"a:{n}\", type: string",
        with: "\"a:{n}\", type: bitmap",
        field: "spec.workload.profile.groups[0].type",
        words: "Unsupported value: \"bitmap\"",
    },
    BadSpec {
        replace: "share: 0.7",
        with: "share: 0.2",
        field: "spec.workload.profile.groups",
        words: "the shares of workload.profile.groups add up to less than 1 (short of it by more than 0.001)",
    },
    // Past the tolerance (0.001) by a little: 1.002.
    BadSpec {
        replace: "share: 0.1",
        with: "share: 0.102",
        field: "spec.workload.profile.groups",
        words: "add up to more than 1 (past it by more than 0.001)",
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_refuses_a_profile_of_an_unknown_type_or_whose_shares_do_not_add_up()
-> anyhow::Result<()> {
    let harness = Harness::without_operator("adm-profile-shares").await?;
    let api = harness.benchmarks();
    let mut failures = refusals_missing(&api, VALID_PROFILE, BAD_PROFILE_SPECS).await?;
    // What membench's own check accepts, the CRD admits: shares off 1 by less than the
    // tolerance (0.9995 here).
    let within = VALID_PROFILE.replace("share: 0.1", "share: 0.0995");
    let benchmark: MemoryBenchmark = serde_saphyr::from_str(&spec("within", &within))?;
    let profile = benchmark.spec.workload.profile.as_ref().expect("a profile");
    if let Err(e) = profile.profile().and_then(|p| p.check()) {
        failures.push(format!(
            "shares summing to 0.9995: membench's check refuses them: {e}"
        ));
    }
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    if let Err(e) = api.create(&dry_run, &benchmark).await {
        failures.push(format!("shares summing to 0.9995: refused: {e}"));
    }
    harness.finish().await;
    anyhow::ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// A valid RDB workload at a URL with a Secret, for the CRD's rules of `workload.rdb`.
const VALID_RDB_URL: &str = "  instanceType: r7i.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\", memory: 256Mi}]\n  workload: {rdb: {url: \"https://backups.example/dump.rdb\", credentialsSecret: {name: creds}}}\n";

const BAD_RDB_SPECS: &[BadSpec] = &[
    BadSpec {
        replace: "{url: \"https://backups.example/dump.rdb\",",
        with: "{url: \"https://backups.example/dump.rdb\", path: dump.rdb,",
        field: "spec.workload.rdb",
        words: "set one of workload.rdb.path and workload.rdb.url",
    },
    BadSpec {
        replace: "{url: \"https://backups.example/dump.rdb\",",
        with: "{",
        field: "spec.workload.rdb",
        words: "set one of workload.rdb.path and workload.rdb.url",
    },
    BadSpec {
        replace: "{url: \"https://backups.example/dump.rdb\",",
        with: "{path: dump.rdb, persistentVolumeClaim: {claimName: b},",
        field: "spec.workload.rdb",
        words: "credentialsSecret holds the credentials for a url",
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_refuses_an_rdb_file_named_twice_or_none_or_credentials_without_a_url()
-> anyhow::Result<()> {
    let harness = Harness::without_operator("adm-rdb").await?;
    let api = harness.benchmarks();
    let failures = refusals_missing(&api, VALID_RDB_URL, BAD_RDB_SPECS).await?;
    harness.finish().await;
    anyhow::ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// Every MemoryBenchmark in manifests/examples, split into its YAML documents as `kubectl apply
/// -f` splits them: `(file, first line of the document, text)`.
fn example_documents() -> Vec<(String, usize, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/examples");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("manifests/examples is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut documents = Vec::new();
    for path in files {
        let name = format!(
            "manifests/examples/{}",
            path.file_name().unwrap().to_string_lossy()
        );
        let text = std::fs::read_to_string(&path).expect("an example is readable");
        let (mut start, mut current) = (1, String::new());
        for (i, line) in text.lines().enumerate() {
            if line.trim_end() == "---" {
                documents.push((name.clone(), start, std::mem::take(&mut current)));
                start = i + 2;
            } else {
                current.push_str(line);
                current.push('\n');
            }
        }
        documents.push((name, start, current));
    }
    documents.retain(|(_, _, text)| text.contains("kind: MemoryBenchmark"));
    documents
}

/// What `kubectl apply --server-side --dry-run=server` of the document, unedited, answers in
/// `namespace`: the API server's strict field validation (an unknown or misspelt field is an
/// error, as kubectl's default makes it), the CRD's schema and its CEL rules.
async fn server_side_dry_run(client: &Client, namespace: &str, text: &str) -> Result<(), String> {
    use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
    let mut document: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| format!("is not YAML: {e}"))?;
    let name = document["metadata"]["name"]
        .as_str()
        .ok_or("has no metadata.name")?
        .to_string();
    document["metadata"]["namespace"] = namespace.into();
    let resource = ApiResource::erase::<MemoryBenchmark>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let params = PatchParams::apply("membench-examples")
        .dry_run()
        .validation_strict();
    api.patch(&name, &params, &Patch::Apply(&document))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_manifest_passes_the_api_servers_dry_run_unedited() -> anyhow::Result<()> {
    let harness = Harness::without_operator("adm-examples").await?;
    let namespace = harness.namespace.name().to_string();
    let documents = example_documents();
    // quick.yaml alone holds five; a split that found none would check nothing.
    anyhow::ensure!(
        documents.len() >= 20,
        "only {} MemoryBenchmark documents found in manifests/examples",
        documents.len()
    );
    let mut failures = Vec::new();
    for (file, line, text) in &documents {
        if let Err(e) = server_side_dry_run(&harness.client, &namespace, text).await {
            failures.push(format!("{file}:{line}: refused by the API server: {e}"));
        }
    }
    // The same check sees a misspelt field and a rule broken, naming them: a check that
    // admitted everything would pass the loop above.
    let (file, line, quick) = documents
        .iter()
        .find(|(file, _, _)| file.ends_with("/quick.yaml"))
        .context("manifests/examples/quick.yaml")?;
    for (broken, words) in [
        (
            quick.replace("repetitions:", "repetitons:"),
            ".spec.repetitons: field not declared in schema",
        ),
        (
            quick.replace("repetitions: 3", "repetitions: 0"),
            "spec.repetitions",
        ),
    ] {
        match server_side_dry_run(&harness.client, &namespace, &broken).await {
            Ok(()) => failures.push(format!("{file}:{line} made wrong ({words}): admitted")),
            Err(e) if e.contains(words) => {}
            Err(e) => failures.push(format!(
                "{file}:{line} made wrong: refused without naming {words}: {e}"
            )),
        }
    }
    // A dry run creates nothing.
    let left = harness.benchmarks().list(&Default::default()).await?;
    if !left.items.is_empty() {
        failures.push(format!(
            "{} benchmarks exist after dry runs",
            left.items.len()
        ));
    }
    harness.finish().await;
    anyhow::ensure!(failures.is_empty(), "{}", failures.join("\n"));
    println!(
        "{} example documents passed the API server's dry run",
        documents.len()
    );
    Ok(())
}
