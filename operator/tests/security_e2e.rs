//! Security on the dev cluster's real API server, with real engines: a password from a Secret
//! end to end (and nowhere it should not be), the NetworkPolicy each benchmark gets, benchmark
//! pods as the API server stores them, and the operator's image allowlist. The dev cluster has
//! no network plugin, so NetworkPolicies are checked as objects (their rules, owner, lifetime),
//! not as traffic that is dropped.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::operator::*;
use common::operator_process::{OperatorArgs, OperatorProcess};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use membench::crd::{MemoryBenchmark, Phase};
use membench_devcluster::DevCluster;
use membench_devcluster::cluster::EnsureOptions;
use membench_devcluster::wait::TestNamespace;

/// Every version of every pod a namespace held, as the API server sent it.
fn record_pod_versions(pods: Api<Pod>) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Vec<Pod>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let shared = seen.clone();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher::watcher(pods, watcher::Config::default()));
        while let Some(event) = events.next().await {
            if let Ok(
                watcher::Event::Apply(pod)
                | watcher::Event::InitApply(pod)
                | watcher::Event::Delete(pod),
            ) = event
            {
                shared.lock().unwrap().push(pod);
            }
        }
    });
    (task, seen)
}

/// The operator as its own process, watching `namespace`, so that its real log and metrics can
/// be searched; debug from membench and the controller runtime, the most it ever logs.
async fn start_operator_process(namespace: &str) -> anyhow::Result<OperatorProcess> {
    let kubeconfig = DevCluster::kubeconfig_with(&EnsureOptions::default()).await?;
    OperatorProcess::start(
        &kubeconfig,
        &OperatorArgs {
            namespaces: &[namespace],
            client_image: CLIENT_IMAGE,
            rust_log: "debug,hyper=info,hyper_util=info,rustls=info,tower=info,h2=info",
            log_name: &format!("membench-operator-{namespace}.log"),
            leader_identity: None,
        },
    )
}

/// A password no fixture or default could contain by chance.
fn fresh_password() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("pw-{nanos:x}-{:x}-Zq", std::process::id())
}

/// PING without a password on the engine pod's address: the reply (an error, if it wants one).
fn ping_without_password(pod: &Pod) -> String {
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default();
    let client = redis::Client::open(format!("redis://{ip}:6379/")).unwrap();
    match client.get_connection_with_timeout(Duration::from_secs(2)) {
        Ok(mut connection) => match redis::cmd("PING").query::<String>(&mut connection) {
            Ok(reply) => reply,
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

/// The engine process's command line, from the pid the node agent reports in containerID.
fn engine_cmdline(pod: &Pod) -> Option<String> {
    let id = pod.status.as_ref()?.container_statuses.as_ref()?[0]
        .container_id
        .clone()?;
    let pid = id.strip_prefix("local-process://")?;
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(String::from_utf8_lossy(&bytes).replace('\0', " "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_from_a_secret_reaches_engine_and_client_and_appears_nowhere_else()
-> anyhow::Result<()> {
    let client = DevCluster::ensure().await?;
    install_crd(&client).await?;
    let namespace = TestNamespace::create(&client, "ns-auth").await?;
    let operator = start_operator_process(namespace.name()).await?;
    let (watch, pod_versions) = record_pod_versions(namespace.pods());
    let password = fresh_password();
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "engine-password"},
        "stringData": {"password": password},
    }))?;
    namespace
        .api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await?;

    // Dragonfly takes its password from its environment, the others from their arguments.
    common::shared_build(membench::crd::EngineKind::Dragonfly, "1.40.0");
    let engines = [
        "{engine: redis, version: \"8.2.3\"}",
        "{engine: valkey, version: \"9.1.2\"}",
        "{engine: dragonfly, version: \"1.40.0\"}",
    ];
    // Loads long enough (several seconds each, at about a million members a second with 8
    // batches in flight) that the operator's progress reads, every 5 s, meet one in flight.
    let body = format!(
        "  instanceType: r7i.4xlarge\n  engines: [{}]\n  workload: {{sortedSet: {{members: 6000000, sampleEvery: 0}}}}\n  repetitions: 2\n  auth: {{passwordSecretRef: {{name: engine-password, key: password}}}}\n",
        engines.join(", ")
    );
    let benchmark: MemoryBenchmark = serde_saphyr::from_str(&spec("auth", &body))?;
    let benchmarks: Api<MemoryBenchmark> = namespace.api();
    benchmarks
        .create(&PostParams::default(), &benchmark)
        .await?;

    // While it runs: the engine refuses a client without the password, its command line does
    // not show it, and progress comes in from the client.
    let mut refused = BTreeMap::new();
    let mut cmdlines = BTreeMap::new();
    let mut progress_seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    let done = loop {
        let current = benchmarks.get("auth").await?;
        if let Some(summary) = current
            .status
            .as_ref()
            .and_then(|s| s.progress.as_ref())
            .map(|p| p.summary.clone())
            && summary.contains("% loaded")
            && !progress_seen.contains(&summary)
        {
            progress_seen.push(summary);
        }
        if matches!(
            current.status.as_ref().and_then(|s| s.phase.clone()),
            Some(Phase::Succeeded | Phase::Failed)
        ) {
            break current;
        }
        for pod in namespace.pods().list(&ListParams::default()).await?.items {
            let ready = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).is_some()
                && is_engine(&pod)
                && pod.metadata.deletion_timestamp.is_none();
            if ready && !refused.contains_key(&pod.name_any()) {
                let reply = ping_without_password(&pod);
                if reply.contains("NOAUTH") || reply.contains("uthentication") {
                    refused.insert(pod.name_any(), reply);
                    cmdlines.insert(pod.name_any(), engine_cmdline(&pod).unwrap_or_default());
                }
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "not finished: {:#?}",
            current.status
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    watch.abort();

    let status = done.status.clone().unwrap_or_default();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    for engine in &status.engines {
        assert_eq!(engine.repetitions.len(), 2, "{engine:#?}");
    }
    assert_eq!(
        refused.len(),
        engines.len(),
        "every engine refused a client without the password: {refused:?}"
    );
    for (pod, cmdline) in &cmdlines {
        assert!(!cmdline.is_empty(), "{pod}: no command line read");
        assert!(
            !cmdline.contains(&password),
            "{pod}'s command line shows the password: {cmdline}"
        );
    }
    println!("engines refused a client without the password: {refused:?}");
    println!("engine command lines: {cmdlines:?}");
    assert!(
        !progress_seen.is_empty(),
        "no progress came in from a client"
    );
    println!("progress seen: {progress_seen:?}");

    // Nowhere it should not be: spec, status, events, pods (every version), log, metrics.
    let benchmark_json = serde_json::to_string(&done)?;
    assert!(
        !benchmark_json.contains(&password),
        "the benchmark holds the password"
    );
    let events = namespace
        .api::<Event>()
        .list(&ListParams::default())
        .await?
        .items;
    assert!(!events.is_empty());
    assert!(
        !serde_json::to_string(&events)?.contains(&password),
        "an event holds the password"
    );
    let pods = pod_versions.lock().unwrap().clone();
    assert!(pods.len() > 4, "the watch saw {} pod versions", pods.len());
    let pods_json = serde_json::to_string(&pods)?;
    assert!(
        !pods_json.contains(&password),
        "a pod spec or status holds the password"
    );
    assert!(
        pods_json.contains("$(MEMBENCH_ENGINE_PASSWORD)"),
        "the engine args reference the variable"
    );
    assert!(
        pods_json.contains("\"secretKeyRef\":{\"key\":\"password\",\"name\":\"engine-password\""),
        "{pods_json}"
    );
    let log = operator.log();
    assert!(
        log.contains("created pod"),
        "the operator logged nothing: {log}"
    );
    assert!(
        !log.contains(&password),
        "the operator's log holds the password"
    );
    let metrics = operator.metrics()?;
    assert!(metrics.contains("membench_"), "{metrics}");
    assert!(
        !metrics.contains(&password),
        "the metrics hold the password"
    );
    drop(operator);
    namespace.delete().await?;
    Ok(())
}

/// PING with `password` on the engine pod's address: the reply.
fn ping_with_password(pod: &Pod, password: &str) -> String {
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default();
    let client = redis::Client::open(format!("redis://:{password}@{ip}:6379/")).unwrap();
    match client.get_connection_with_timeout(Duration::from_secs(2)) {
        Ok(mut connection) => match redis::cmd("PING").query::<String>(&mut connection) {
            Ok(reply) => reply,
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_benchmark_that_names_no_password_gets_a_random_one_its_engines_require()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-genpw", settings()).await?;
    // Long enough loads that the engine is caught running (as in the spec-password test).
    let body = "  instanceType: r7i.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\"}]\n  workload: {sortedSet: {members: 6000000, sampleEvery: 0}}\n  repetitions: 2\n";
    let created = harness.create(&spec("genpw", body)).await?;
    let reference = membench::auth::generated_password_secret(&created);

    // While it runs: the engine refuses a client without the password and answers one with it.
    let (mut refused, mut answered) = (None, None);
    let deadline = Instant::now() + Duration::from_secs(600);
    let done = loop {
        let current = harness.benchmarks().get("genpw").await?;
        if matches!(
            current.status.as_ref().and_then(|s| s.phase.clone()),
            Some(Phase::Succeeded | Phase::Failed)
        ) {
            break current;
        }
        if answered.is_none() {
            for pod in harness.pods().list(&ListParams::default()).await?.items {
                let running = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).is_some()
                    && is_engine(&pod)
                    && pod.metadata.deletion_timestamp.is_none();
                if !running {
                    continue;
                }
                let without = ping_without_password(&pod);
                if without.contains("NOAUTH") || without.contains("uthentication") {
                    let password = harness.generated_engine_password("genpw").await?;
                    refused = Some(without);
                    answered = Some(ping_with_password(&pod, &password));
                }
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "not finished: {:#?}",
            current.status
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let status = done.status.clone().unwrap_or_default();
    assert_eq!(status.phase, Some(Phase::Succeeded), "{status:#?}");
    assert_eq!(engine(&done, 0).repetitions.len(), 2);
    let refused = refused.expect("the engine was never seen refusing a client without a password");
    assert_eq!(
        answered.as_deref(),
        Some("PONG"),
        "refused without: {refused}"
    );

    // The Secret: the benchmark's own, immutable, 32 random bytes as hex, in no other object.
    let secrets: Api<Secret> = harness.namespace.api();
    let secret = secrets.get(&reference.name).await?;
    let owner = &secret.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        (
            "MemoryBenchmark",
            created.uid().unwrap().as_str(),
            Some(true)
        )
    );
    assert_eq!(secret.immutable, Some(true));
    let password = harness.generated_engine_password("genpw").await?;
    assert!(
        password.len() == 64 && password.bytes().all(|b| b.is_ascii_hexdigit()),
        "{password}"
    );
    assert!(!serde_json::to_string(&done)?.contains(&password));
    let events = harness
        .namespace
        .api::<Event>()
        .list(&ListParams::default())
        .await?
        .items;
    assert!(!serde_json::to_string(&events)?.contains(&password));

    // Deleted with the benchmark, by the garbage collector.
    harness
        .benchmarks()
        .delete("genpw", &DeleteParams::background())
        .await?;
    within(
        Duration::from_secs(60),
        "deleted with its benchmark",
        || async {
            Ok(secrets
                .get_opt(&reference.name)
                .await?
                .is_none()
                .then_some(()))
        },
    )
    .await?;
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_password_secret_is_named_while_waited_for_and_the_run_goes_on_once_it_exists()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-nosecret", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\"}]\n  workload: {sortedSet: {members: 1000, sampleEvery: 0}}\n  repetitions: 1\n  auth: {passwordSecretRef: {name: late-password, key: password}}\n";
    harness.create(&spec("nosecret", body)).await?;
    // The node cannot start the engine without its Secret: the status says which one, and
    // where, while the node retries (not "the engine is starting").
    let waiting = harness
        .wait_for(
            "nosecret",
            Duration::from_secs(60),
            "waiting for its Secret",
            |b| {
                b.status
                    .as_ref()
                    .and_then(|s| s.engines.first())
                    .is_some_and(|e| {
                        e.reason.as_ref().map(|r| r.as_str()) == Some("WaitingForConfig")
                    })
            },
        )
        .await?;
    let message = engine(&waiting, 0).message.unwrap_or_default();
    for expected in ["late-password", harness.namespace.name(), "retries"] {
        assert!(message.contains(expected), "{expected:?} in {message:?}");
    }
    // The Secret arrives: the node's next try starts the engine and the benchmark finishes.
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "late-password"},
        "stringData": {"password": fresh_password()},
    }))?;
    harness
        .namespace
        .api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await?;
    let done = harness
        .finished("nosecret", Duration::from_secs(120))
        .await?;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase.clone()),
        Some(Phase::Succeeded),
        "{:#?}",
        done.status
    );
    assert_eq!(engine(&done, 0).repetitions.len(), 1);
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_benchmark_gets_a_network_policy_owned_by_it_before_its_first_pod()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-netpol", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\"}]\n  workload: {sortedSet: {members: 1000, sampleEvery: 0}}\n  repetitions: 1\n";
    let created = harness.create(&spec("netpol", body)).await?;
    let (watch, pod_versions) = record_pod_versions(harness.pods());
    let done = harness.finished("netpol", Duration::from_secs(120)).await?;
    watch.abort();
    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase.clone()),
        Some(Phase::Succeeded)
    );

    let policies: Api<NetworkPolicy> = harness.namespace.api();
    let policy = policies.get("netpol").await?;
    let owner = &policy.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        (
            "MemoryBenchmark",
            created.uid().unwrap().as_str(),
            Some(true)
        )
    );
    // Created before the first pod.
    let policy_created = policy.metadata.creation_timestamp.clone().unwrap().0;
    let first_pod = pod_versions
        .lock()
        .unwrap()
        .iter()
        .filter_map(|p| p.metadata.creation_timestamp.clone())
        .map(|t| t.0)
        .min()
        .unwrap();
    assert!(
        policy_created <= first_pod,
        "policy {policy_created} after the first pod {first_pod}"
    );
    // As the API server stored it: the benchmark's pods, in and out.
    let spec = serde_json::to_value(policy.spec.clone().unwrap())?;
    assert_eq!(
        spec["podSelector"]["matchLabels"]["membench.io/benchmark"],
        "netpol"
    );
    assert_eq!(
        spec["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    assert_eq!(spec["ingress"][0]["ports"][0]["port"], 6379);
    assert_eq!(
        spec["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
        "client"
    );
    assert_eq!(spec["ingress"][1]["ports"][0]["port"], 9121);
    assert_eq!(
        spec["ingress"][1]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
        "operator"
    );
    assert_eq!(
        spec["egress"][0]["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
        "engine"
    );
    // Every pod the benchmark had is selected by it.
    for pod in pod_versions.lock().unwrap().iter() {
        for (key, value) in spec["podSelector"]["matchLabels"].as_object().unwrap() {
            assert_eq!(
                pod.labels().get(key).map(String::as_str),
                value.as_str(),
                "{} is not selected",
                pod.name_any()
            );
        }
    }
    // Deleted with the benchmark, by the garbage collector.
    harness
        .benchmarks()
        .delete("netpol", &DeleteParams::background())
        .await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while policies.get_opt("netpol").await?.is_some() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the NetworkPolicy outlived its benchmark by 60 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    harness.finish().await;
    Ok(())
}

/// Polls `probe` every 250 ms until it yields a value, for at most `timeout`.
async fn within<T, F, Fut>(timeout: Duration, what: &str, probe: F) -> anyhow::Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await? {
            return Ok(value);
        }
        anyhow::ensure!(Instant::now() < deadline, "not {what} within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_benchmark_re_created_under_the_same_name_replaces_the_policy_left_by_the_earlier_one()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-netpol-again", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\"}]\n  workload: {sortedSet: {members: 1000, sampleEvery: 0}}\n  repetitions: 1\n";
    let first = harness.create(&spec("again", body)).await?;
    harness.finished("again", Duration::from_secs(120)).await?;
    let policies: Api<NetworkPolicy> = harness.namespace.api();

    // Deleted with its dependents orphaned, the earlier benchmark leaves its policy behind
    // without an owner, as a benchmark re-created before the garbage collector came by finds it.
    harness
        .benchmarks()
        .delete("again", &DeleteParams::orphan())
        .await?;
    let benchmarks = harness.benchmarks();
    within(Duration::from_secs(60), "deleted", || async {
        Ok(benchmarks.get_opt("again").await?.is_none().then_some(()))
    })
    .await?;
    let stale = within(Duration::from_secs(60), "orphaned", || async {
        let policy = policies.get_opt("again").await?;
        anyhow::ensure!(policy.is_some(), "the orphaned policy was deleted");
        Ok(policy.filter(|p| p.owner_references().is_empty()))
    })
    .await?;

    let second = harness.create(&spec("again", body)).await?;
    assert_ne!(first.uid(), second.uid());
    let done = harness.finished("again", Duration::from_secs(120)).await?;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase.clone()),
        Some(Phase::Succeeded)
    );
    let policy = policies.get("again").await?;
    assert_ne!(policy.uid(), stale.uid(), "the stale policy was kept");
    let owners: Vec<_> = policy
        .owner_references()
        .iter()
        .map(|o| (o.kind.as_str(), o.uid.as_str(), o.controller))
        .collect();
    assert_eq!(
        owners,
        [(
            "MemoryBenchmark",
            second.uid().unwrap().as_str(),
            Some(true)
        )]
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benchmark_pods_read_back_have_no_token_no_host_namespaces_and_the_restricted_context()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-podsec", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines: [{engine: valkey, version: \"9.1.2\"}]\n  workload: {strings: {keys: 1000}}\n  repetitions: 1\n";
    let (watch, pod_versions) = record_pod_versions(harness.pods());
    harness.create(&spec("podsec", body)).await?;
    let done = harness.finished("podsec", Duration::from_secs(120)).await?;
    watch.abort();
    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase.clone()),
        Some(Phase::Succeeded)
    );
    let pods = pod_versions.lock().unwrap().clone();
    let mut components = std::collections::BTreeSet::new();
    for pod in &pods {
        let name = pod.name_any();
        components.insert(
            pod.labels()
                .get("app.kubernetes.io/component")
                .cloned()
                .unwrap_or_default(),
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.automount_service_account_token, Some(false), "{name}");
        assert!(
            spec.volumes
                .iter()
                .flatten()
                .all(|v| v.projected.is_none() && v.host_path.is_none()),
            "{name}: a token or host volume"
        );
        assert_ne!(spec.host_network, Some(true), "{name}");
        assert_ne!(spec.host_pid, Some(true), "{name}");
        assert_ne!(spec.host_ipc, Some(true), "{name}");
        let pod_context = spec.security_context.clone().unwrap_or_default();
        assert_eq!(pod_context.run_as_non_root, Some(true), "{name}");
        assert_eq!(
            pod_context.seccomp_profile.map(|s| s.type_),
            Some("RuntimeDefault".into()),
            "{name}"
        );
        for container in &spec.containers {
            let context = container.security_context.clone().unwrap_or_default();
            assert_eq!(context.allow_privilege_escalation, Some(false), "{name}");
            assert_eq!(context.read_only_root_filesystem, Some(true), "{name}");
            assert_ne!(context.privileged, Some(true), "{name}");
            let capabilities = context.capabilities.unwrap_or_default();
            assert_eq!(capabilities.drop, Some(vec!["ALL".to_string()]), "{name}");
            assert!(capabilities.add.unwrap_or_default().is_empty(), "{name}");
            assert!(
                container
                    .ports
                    .iter()
                    .flatten()
                    .all(|p| p.host_port.is_none()),
                "{name}"
            );
        }
    }
    assert_eq!(
        components.into_iter().collect::<Vec<_>>(),
        ["client", "engine"]
    );
    harness.finish().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_image_outside_the_allowlist_is_policy_denied_and_nothing_is_created()
-> anyhow::Result<()> {
    let harness = Harness::start("ns-allow", settings()).await?;
    let body = "  instanceType: r7i.4xlarge\n  engines: [{engine: redis, version: \"7.0.15\", image: \"registry.example.com/anyone/redis:7.0.15\"}]\n  workload: {sortedSet: {members: 1000, sampleEvery: 0}}\n";
    harness.create(&spec("allow", body)).await?;
    let done = harness.finished("allow", Duration::from_secs(60)).await?;
    let failed = condition(&done, "Failed").expect("a Failed condition");
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", "PolicyDenied")
    );
    assert!(
        failed.message.contains("spec.engines[0].image")
            && failed.message.contains("allowedImages"),
        "{}",
        failed.message
    );
    // Once the operator has decided again on the refused benchmark, still nothing may exist.
    harness
        .decided_again("allow", Duration::from_secs(30))
        .await?;
    assert!(
        harness
            .pods()
            .list(&ListParams::default())
            .await?
            .items
            .is_empty()
    );
    let policies: Api<NetworkPolicy> = harness.namespace.api();
    assert!(
        policies
            .list(&ListParams::default())
            .await?
            .items
            .is_empty()
    );
    harness.finish().await;
    Ok(())
}
