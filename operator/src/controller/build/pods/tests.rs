//! Tests of the pod builders and of telling the operator's own pods from look-alikes.

use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::*;
use crate::client::measurement::plan::{PLAN_ENV, RunPlan, WorkloadPlan};
use crate::crd::{EngineKind, EngineSpec, RecordLayout};
use crate::validation::spec_file::parse_specs;

pub(crate) fn benchmark(extra: &str) -> MemoryBenchmark {
    let mut b = parse_specs(&format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: zset, namespace: bench}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{{engine: redis, version: \"7.0.15\"}}, {{engine: valkey, version: \"9.1.2\", args: [--maxmemory, 1gb]}}]\n  workload: {{sortedSet: {{members: 20000}}}}\n  repetitions: 3\n{extra}"
    ))
    .unwrap()
    .remove(0);
    b.metadata.uid = Some("uid-1".into());
    b
}

/// Each engine entry's plan, as the operator's validation makes them.
fn plans(b: &MemoryBenchmark) -> Vec<RunPlan> {
    crate::validation::validate(b).unwrap().plans
}

/// A benchmark from a whole spec file's `yaml`, with a UID as the API server gives it.
fn parsed(yaml: &str) -> MemoryBenchmark {
    let mut b = parse_specs(yaml).unwrap().remove(0);
    b.metadata.uid = Some("uid-1".into());
    b
}

/// The plan run `run`'s client pod (first attempt) carries, read back as the client reads it.
fn plan_of_run(b: &MemoryBenchmark, run: usize) -> RunPlan {
    let pod = client_pod(b, run, 1, &plans(b), "127.1.0.5", &PodSettings::default());
    plan_of_client_pod(&pod)
        .expect("the client pod carries a plan")
        .unwrap()
}

#[test]
fn the_engine_pod_is_pinned_to_the_instance_type_and_arch_with_guaranteed_qos() {
    let b = benchmark(
        "  arch: arm64\n  placement:\n    nodeSelector: {pool: bench}\n    tolerations: [{key: dedicated, operator: Equal, value: bench, effect: NoSchedule}]\n",
    );
    let pod = engine_pod(&b, 0, 512 << 20, None, &PodSettings::default());
    let spec = pod.spec.unwrap();
    let selector = spec.node_selector.unwrap();
    assert_eq!(selector[INSTANCE_TYPE_LABEL], "r8g.4xlarge");
    assert_eq!(selector[ARCH_LABEL], "arm64");
    assert_eq!(selector["pool"], "bench");
    assert_eq!(
        spec.tolerations.unwrap(),
        vec![Toleration {
            key: Some("dedicated".into()),
            operator: Some("Equal".into()),
            value: Some("bench".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        }]
    );
    let resources = spec.containers[0].resources.clone().unwrap();
    assert_eq!(resources.requests, resources.limits);
    assert_eq!(
        resources.limits.unwrap()["memory"],
        Quantity("512Mi".into())
    );
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(pod.metadata.name.as_deref(), Some("zset-0-engine"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("bench"));
    let owner = &pod.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("MemoryBenchmark", Some(true))
    );
}

#[test]
fn engines_keep_a_node_to_themselves_across_namespaces() {
    let pod = engine_pod(&benchmark(""), 1, 512 << 20, None, &PodSettings::default());
    let anti = pod
        .spec
        .unwrap()
        .affinity
        .unwrap()
        .pod_anti_affinity
        .unwrap();
    let term = &anti
        .required_during_scheduling_ignored_during_execution
        .unwrap()[0];
    assert_eq!(term.topology_key, HOSTNAME_LABEL);
    assert_eq!(term.namespace_selector, Some(LabelSelector::default()));
    let labels = term.label_selector.clone().unwrap().match_labels.unwrap();
    assert_eq!(labels[LABEL_COMPONENT], "engine");
    assert_eq!(labels[LABEL_NAME], "membench");
    // The engine pod itself carries the labels the term selects.
    let own = pod.metadata.labels.unwrap();
    assert_eq!(own[LABEL_COMPONENT], "engine");
    assert_eq!(own[LABEL_ENGINE_INDEX], "1");
    assert_eq!(own[LABEL_BENCHMARK], "zset");
    assert_eq!(own[LABEL_INSTANCE], "zset");
}

#[test]
fn user_affinity_is_kept_next_to_membench_anti_affinity() {
    let b = benchmark(
        "  placement:\n    affinity:\n      nodeAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [eu-west-1a]}]}]\n",
    );
    let affinity = engine_pod(&b, 0, 1 << 30, None, &PodSettings::default())
        .spec
        .unwrap()
        .affinity
        .unwrap();
    assert!(affinity.node_affinity.is_some());
    assert!(affinity.pod_anti_affinity.is_some());
}

#[test]
fn engines_run_without_persistence_on_port_6379_with_user_args_last() {
    let b = benchmark("");
    let args = engine_args(&b.spec.engines[1]);
    assert_eq!(
        args,
        [
            "--port",
            "6379",
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            "--maxmemory",
            "1gb"
        ]
    );
    let pod = engine_pod(&b, 1, 1 << 30, None, &PodSettings::default());
    assert_eq!(
        pod.spec.unwrap().containers[0].image.as_deref(),
        Some("valkey/valkey:9.1.2")
    );
    let dragonfly = EngineSpec {
        engine: EngineKind::Dragonfly,
        ..b.spec.engines[0].clone()
    };
    assert!(engine_args(&dragonfly).contains(&"--dbfilename=".to_string()));
}

#[test]
fn the_client_runs_next_to_its_engine_and_writes_its_result_to_the_termination_message() {
    let b = benchmark("");
    let pod = client_pod(&b, 1, 2, &plans(&b), "127.1.0.5", &PodSettings::default());
    assert_eq!(pod.metadata.name.as_deref(), Some("zset-1-client-2"));
    let spec = pod.spec.unwrap();
    let affinity = spec.affinity.unwrap().pod_affinity.unwrap();
    let term = &affinity
        .required_during_scheduling_ignored_during_execution
        .unwrap()[0];
    assert_eq!(term.topology_key, HOSTNAME_LABEL);
    let selected = term.label_selector.clone().unwrap().match_labels.unwrap();
    assert_eq!(selected[LABEL_ENGINE_INDEX], "1");
    assert_eq!(selected[LABEL_COMPONENT], "engine");
    assert_eq!(selected[LABEL_BENCHMARK], "zset");
    let container = &spec.containers[0];
    let args = container.args.clone().unwrap().join(" ");
    assert_eq!(
        args,
        "load --addr 127.1.0.5:6379 --output json --result-file /dev/termination-log --progress-port 9121 --serve-result-seconds 30 --keep-data",
        "where the engine is and where the result goes; the settings are in the plan"
    );
    let env = container.env.clone().unwrap();
    let plan = env.iter().find(|e| e.name == PLAN_ENV).expect("the plan");
    let plan = RunPlan::from_json(plan.value.as_deref().unwrap()).unwrap();
    assert_eq!(
        plan.workload,
        WorkloadPlan::SortedSet {
            members: 20000,
            key: "membench:zset".into(),
            sample_every: 1_000_000
        }
    );
    let settings = &plan.settings;
    assert_eq!(
        (
            settings.pipeline,
            settings.repetitions,
            settings.settle_seconds
        ),
        (100, 3, 0)
    );
    assert!(
        !settings.refuse_existing_keys,
        "a later attempt may find what an earlier one loaded"
    );
    assert_eq!(
        settings.read_config,
        ["maxmemory"],
        "the setting the entry's args change is read back"
    );
    assert_eq!(
        container.termination_message_path.as_deref(),
        Some(TERMINATION_MESSAGE_PATH)
    );
    assert_eq!(spec.automount_service_account_token, Some(false));
    assert_eq!(pod.metadata.finalizers, Some(vec![RESULT_FINALIZER.into()]));
    assert_eq!(
        container
            .security_context
            .clone()
            .unwrap()
            .read_only_root_filesystem,
        Some(true)
    );
    assert_eq!(client_pod_name("zset", 0, 1), "zset-0-client");
    assert_eq!(engine_address("fd00::5"), "[fd00::5]:6379");
}

#[test]
fn each_workload_reaches_the_client_whole_in_its_plan() {
    for (workload, planned) in [
        (
            "{records: {records: 10, layout: strings, fields: [name, age]}}",
            WorkloadPlan::Records {
                records: 10,
                layout: RecordLayout::Strings,
                fields: vec!["name".into(), "age".into()],
            },
        ),
        (
            "{randomStrings: {requests: 100, keyspace: 50, valueSize: 16, seed: 7}}",
            WorkloadPlan::RandomStrings {
                requests: 100,
                keyspace: 50,
                value_size: 16,
                seed: 7,
            },
        ),
    ] {
        let b = parsed(&format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: w, namespace: bench}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{{engine: valkey, version: \"9.1.2\"}}]\n  workload: {workload}\n"
        ));
        assert_eq!(plan_of_run(&b, 0).workload, planned);
    }
}

#[test]
fn both_pods_take_the_password_from_the_specs_secret_or_the_generated_one_and_no_spec_holds_it() {
    let b = benchmark("  auth: {passwordSecretRef: {name: engine-password, key: password}}\n");
    let engine = engine_pod(&b, 1, 1 << 30, None, &PodSettings::default());
    let container = &engine.spec.as_ref().unwrap().containers[0];
    let args = container.args.clone().unwrap();
    // The password reference, then the spec's own args (engine 1's `--maxmemory 1gb`).
    assert_eq!(
        args[args.len() - 4..],
        [
            "--requirepass",
            "$(MEMBENCH_ENGINE_PASSWORD)",
            "--maxmemory",
            "1gb"
        ]
    );
    let env = container.env.clone().unwrap();
    let secret = env[0]
        .value_from
        .as_ref()
        .unwrap()
        .secret_key_ref
        .as_ref()
        .unwrap();
    assert_eq!(
        (env[0].name.as_str(), secret.name.as_str()),
        ("MEMBENCH_ENGINE_PASSWORD", "engine-password")
    );
    let client = client_pod(&b, 1, 1, &plans(&b), "127.1.0.5", &PodSettings::default());
    let env = client.spec.unwrap().containers[0].env.clone().unwrap();
    let password = env.iter().find(|e| e.name == "MEMBENCH_PASSWORD").unwrap();
    assert!(password.value.is_none());
    assert_eq!(
        password
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap()
            .key,
        "password"
    );
    // Without auth, both take the Secret the operator generates for the benchmark.
    let open = benchmark("");
    let engine = engine_pod(&open, 1, 1 << 30, None, &PodSettings::default());
    let container = &engine.spec.as_ref().unwrap().containers[0];
    let args = container.args.clone().unwrap();
    // The password reference, then the spec's own args (engine 1's `--maxmemory 1gb`).
    assert_eq!(
        args[args.len() - 4..],
        [
            "--requirepass",
            "$(MEMBENCH_ENGINE_PASSWORD)",
            "--maxmemory",
            "1gb"
        ]
    );
    let secret_of = |env: &[EnvVar], name: &str| {
        let var = env.iter().find(|e| e.name == name).expect(name);
        assert!(var.value.is_none(), "{name} holds a literal value");
        let selector = var.value_from.clone().unwrap().secret_key_ref.unwrap();
        (selector.name, selector.key)
    };
    let generated = (
        "zset-engine-password-uid-1".to_string(),
        "password".to_string(),
    );
    assert_eq!(
        secret_of(container.env.as_ref().unwrap(), "MEMBENCH_ENGINE_PASSWORD"),
        generated
    );
    let client = client_pod(
        &open,
        1,
        1,
        &plans(&open),
        "127.1.0.5",
        &PodSettings::default(),
    );
    let env = client.spec.unwrap().containers[0].env.clone().unwrap();
    assert_eq!(secret_of(&env, "MEMBENCH_PASSWORD"), generated);
}

#[test]
fn a_client_pod_is_read_only_when_name_owner_and_annotation_agree() {
    let b = benchmark("");
    let client = client_pod(&b, 1, 2, &plans(&b), "127.1.0.5", &PodSettings::default());
    assert_eq!(
        client.annotations()[ANNOTATION_CLIENT_OF],
        "uid-1/1/2",
        "benchmark UID, engine index and attempt"
    );
    assert!(owned_by(&client, &b));
    // A pod that copies the labels and the owner but not the operator's annotation.
    let mut forged = client.clone();
    forged.metadata.annotations = None;
    assert!(!owned_by(&forged, &b));
    // The annotation of another attempt, or a name that is not the attempt's.
    let mut other_attempt = client.clone();
    other_attempt
        .annotations_mut()
        .insert(ANNOTATION_CLIENT_OF.into(), "uid-1/1/3".into());
    assert!(!owned_by(&other_attempt, &b));
    let mut renamed = client.clone();
    renamed.metadata.name = Some("zset-1-client-evil".into());
    assert!(!owned_by(&renamed, &b));
    let mut engine = engine_pod(&b, 1, 1 << 30, None, &PodSettings::default());
    assert!(owned_by(&engine, &b));
    engine.metadata.name = Some("zset-1-engine-2".into());
    assert!(!owned_by(&engine, &b));
}

#[test]
fn only_pods_controlled_by_this_very_benchmark_are_its_own() {
    let b = benchmark("");
    let pod = engine_pod(&b, 0, 1 << 30, None, &PodSettings::default());
    assert!(owned_by(&pod, &b));
    let mut recreated = b.clone();
    recreated.metadata.uid = Some("uid-2".into());
    assert!(!owned_by(&pod, &recreated));
}

#[test]
fn engine_and_client_pods_pull_with_the_operators_secrets_then_the_specs_each_once() {
    let names = |pod: &Pod| -> Vec<String> {
        pod.spec
            .as_ref()
            .unwrap()
            .image_pull_secrets
            .iter()
            .flatten()
            .map(|s| s.name.clone())
            .collect()
    };
    let b = benchmark("  imagePullSecrets: [{name: team-registry}, {name: regcred}]\n");
    let settings = PodSettings {
        image_pull_secrets: vec!["regcred".into(), "mirror".into()],
        ..Default::default()
    };
    let engine = engine_pod(&b, 0, 512 << 20, None, &settings);
    let client = client_pod(&b, 0, 0, &plans(&b), "198.18.0.7", &settings);
    for pod in [&engine, &client] {
        assert_eq!(names(pod), ["regcred", "mirror", "team-registry"]);
    }

    // None given: the pods have no imagePullSecrets at all (not an empty list).
    let plain = benchmark("");
    let engine = engine_pod(&plain, 0, 512 << 20, None, &PodSettings::default());
    assert_eq!(engine.spec.unwrap().image_pull_secrets, None);
}

#[test]
fn a_dragonfly_pod_gets_maxmemory_at_80_percent_of_its_limit_before_the_specs_own_args() {
    let mut b = benchmark("");
    let mut dragonfly = EngineSpec::new(EngineKind::Dragonfly, "1.40.0");
    dragonfly.args = vec!["--maxmemory=700mb".into()];
    b.spec.engines = vec![dragonfly];
    let pod = engine_pod(&b, 0, 1 << 30, None, &PodSettings::default());
    let args = pod.spec.unwrap().containers[0].args.clone().unwrap();
    let ours = args
        .iter()
        .position(|a| a == &format!("--maxmemory={}", (1u64 << 30) * 4 / 5))
        .unwrap_or_else(|| panic!("no --maxmemory of 80% of 1 GiB: {args:?}"));
    let theirs = args.iter().position(|a| a == "--maxmemory=700mb").unwrap();
    assert!(
        ours < theirs,
        "the spec's own flag must come last and win: {args:?}"
    );
}

#[test]
fn an_entrys_config_follows_membenchs_args_and_precedes_its_own_in_the_engine_pod() {
    let mut b = benchmark("");
    b.spec.engines[1].config = [("hash-max-listpack-entries".to_string(), "0".to_string())].into();
    let pod = engine_pod(&b, 1, 1 << 30, None, &PodSettings::default());
    let args = pod.spec.unwrap().containers[0].args.clone().unwrap();
    let joined = args.join(" ");
    assert!(
        joined.ends_with("--requirepass $(MEMBENCH_ENGINE_PASSWORD) --hash-max-listpack-entries 0 --maxmemory 1gb"),
        "{joined}"
    );
    let mut dragonfly = benchmark("");
    dragonfly.spec.engines[1].engine = EngineKind::Dragonfly;
    dragonfly.spec.engines[1].args = vec!["--proactor_threads=1".into()];
    dragonfly.spec.engines[1].config = [("maxmemory".to_string(), "2G".to_string())].into();
    let pod = engine_pod(&dragonfly, 1, 1 << 30, None, &PodSettings::default());
    let args = pod.spec.unwrap().containers[0].args.clone().unwrap();
    let computed = args
        .iter()
        .position(|a| a.starts_with("--maxmemory=") && a != "--maxmemory=2G");
    let given = args.iter().position(|a| a == "--maxmemory=2G");
    assert!(
        computed < given && given.is_some(),
        "the spec's maxmemory comes later and wins: {args:?}"
    );
    assert_eq!(
        args.last().map(String::as_str),
        Some("--proactor_threads=1")
    );
    let client = client_pod(
        &dragonfly,
        1,
        1,
        &plans(&dragonfly),
        "127.1.0.5",
        &PodSettings::default(),
    );
    let plan = plan_of_client_pod(&client).unwrap().unwrap();
    assert_eq!(plan.settings.read_config, ["maxmemory", "proactor_threads"]);
}

#[test]
fn the_client_gets_the_workloads_ttl_unless_its_entry_is_without_ttl() {
    let b = parsed(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: ttl, namespace: bench}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\"}, {engine: valkey, version: \"9.1.2\", name: plain, withoutTtl: true}]\n  workload: {strings: {keys: 1000, ttlSeconds: 3600, ttlShare: 0.25}}\n",
    );
    let ttl = |run: usize| plan_of_run(&b, run).settings.ttl;
    assert_eq!(ttl(0).map(|t| (t.seconds, t.share)), Some((3600, 0.25)));
    assert_eq!(ttl(1), None);
}

#[test]
fn a_run_on_a_later_instance_type_takes_its_own_entrys_settings() {
    let b = parsed(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: both, namespace: bench}\nspec:\n  instanceTypes: [r8g.4xlarge, r7i.4xlarge]\n  engines: [{engine: redis, version: \"7.0.15\"}, {engine: valkey, version: \"9.1.2\", config: {hash-max-listpack-entries: \"64\"}}]\n  workload: {sortedSet: {members: 20000}}\n  repetitions: 3\n",
    );
    let read_back = |run: usize| plan_of_run(&b, run).settings.read_config;
    // Runs 2 and 3 are the two entries again, on r7i.4xlarge.
    assert!(read_back(2).is_empty(), "{:?}", read_back(2));
    assert_eq!(read_back(3), ["hash-max-listpack-entries"]);
}

#[test]
fn peak_churn_and_eviction_reach_the_client_and_a_snapshot_gets_a_bounded_data_directory() {
    let b = parsed(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {name: s, namespace: bench}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\"}]\n  workload: {strings: {keys: 1000}}\n  peak: {snapshot: {writesPerSecond: 5000, writeShare: 0.5}}\n  churn: {rounds: 2, deleteShare: 0.5, defrag: true}\n  eviction: {maxmemory: 64mb, policy: allkeys-lfu, loadTo: 2}\n",
    );
    let settings = plan_of_run(&b, 0).settings;
    let snapshot = settings.snapshot.unwrap();
    assert_eq!((snapshot.writes_per_sec, snapshot.write_share), (5000, 0.5));
    let churn = settings.churn.unwrap();
    assert_eq!((churn.rounds, churn.delete_share), (2, Some(0.5)));
    assert!(churn.defrag && churn.defrag_seconds == 60, "{churn:?}");
    let eviction = settings.eviction.unwrap();
    assert_eq!(
        (
            eviction.maxmemory,
            eviction.policy.as_str(),
            eviction.load_to
        ),
        (64 << 20, "allkeys-lfu", 2.0)
    );
    // The operator reads the engine container's memory at a snapshot's marks.
    let pod = client_pod(&b, 0, 1, &plans(&b), "127.1.0.5", &PodSettings::default());
    let args = pod.spec.unwrap().containers[0].args.clone().unwrap();
    assert!(
        args.contains(&"--container-memory-marks".to_string()),
        "{args:?}"
    );
    let limit = |b: &MemoryBenchmark| {
        engine_pod(b, 0, 512 << 20, None, &PodSettings::default())
            .spec
            .unwrap()
            .volumes
            .unwrap()[0]
            .empty_dir
            .clone()
            .unwrap()
            .size_limit
    };
    assert_eq!(limit(&b).map(|q| q.0), Some((512u64 << 20).to_string()));
    assert_eq!(limit(&benchmark("")), None, "no snapshot, no limit");
}

#[test]
fn an_entrys_own_maxmemory_is_held_from_its_engine_for_the_load_past_it() {
    let yaml = |eviction: &str| {
        format!(
            "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: s, namespace: bench}}\nspec:\n  instanceType: r8g.4xlarge\n  engines:\n    - {{engine: valkey, version: \"9.1.2\", config: {{maxmemory: 64mb, maxmemory-policy: allkeys-lfu, hash-max-listpack-entries: \"64\"}}}}\n  workload: {{strings: {{keys: 1000}}}}\n{eviction}"
        )
    };
    let b = parsed(&yaml("  eviction: {loadTo: 2}\n"));
    crate::validation::validate(&b).unwrap();
    let settings = plan_of_run(&b, 0).settings;
    let eviction = settings.eviction.unwrap();
    assert_eq!(
        (
            eviction.maxmemory,
            eviction.policy.as_str(),
            eviction.load_to
        ),
        (64 << 20, "allkeys-lfu", 2.0)
    );
    assert_eq!(
        settings.read_config,
        ["hash-max-listpack-entries"],
        "the held settings are not read back"
    );
    let engine_args = |b: &MemoryBenchmark| {
        engine_pod(b, 0, 512 << 20, None, &PodSettings::default())
            .spec
            .unwrap()
            .containers[0]
            .args
            .clone()
            .unwrap()
    };
    let engine = engine_args(&b);
    assert!(!engine.contains(&"--maxmemory".to_string()), "{engine:?}");
    assert!(
        engine.contains(&"--hash-max-listpack-entries".to_string()),
        "{engine:?}"
    );
    // Without spec.eviction they are the engine's own from its start.
    let engine = engine_args(&parsed(&yaml("")));
    assert!(engine.contains(&"--maxmemory".to_string()), "{engine:?}");
    // Both limits, or none at all: refused when the spec is read, naming the entry.
    let both = parse_specs(&yaml("  eviction: {maxmemory: 32mb}\n"))
        .unwrap_err()
        .to_string();
    assert!(
        both.contains("spec.engines[0]") && both.contains("keep one"),
        "{both}"
    );
    let none = parse_specs(
        &yaml("  eviction: {loadTo: 2}\n")
            .replace("maxmemory: 64mb, maxmemory-policy: allkeys-lfu, ", ""),
    )
    .unwrap_err()
    .to_string();
    assert!(
        none.contains("set spec.eviction.maxmemory, or config.maxmemory"),
        "{none}"
    );
}
