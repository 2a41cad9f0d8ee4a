//! The whole result a client serves beside its progress, without a cluster: taken when the
//! client reports done (every repetition, every settle reading, the whole curve, which its
//! termination message cannot hold), only from the latest client pod, refused when it breaks
//! the bounds, left to the termination message when it cannot be read (the fallback order),
//! and kept when the client's node stops reporting. Which pods are read, and that a status of
//! 100 repetitions stays far below what the API server stores.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::client::measurement::measure::{BenchmarkReport, MemorySample, SettledMemory};
use crate::client::pod_io::result::{ClientResult, ReadError};
use crate::controller::decide::observation::{LoadProbe, ServedResult};
use crate::controller::decide::plan::result_targets;
use crate::controller::decide::test_fixtures::*;
use crate::crd::{ConditionReason, EngineState, MemoryBenchmark};
use crate::validation::spec_file::parse_specs;

const REPETITIONS: u32 = 100;

/// A benchmark of 100 repetitions with settle readings and a growth curve, its first status
/// written at time 0.
fn hundred_repetitions() -> MemoryBenchmark {
    let mut b = parse_specs(&format!(
        "apiVersion: membench.io/v1alpha1\nkind: MemoryBenchmark\nmetadata: {{name: zset, namespace: bench}}\nspec:\n  instanceType: r8g.4xlarge\n  engines: [{{engine: redis, version: \"7.0.15\"}}, {{engine: valkey, version: \"9.1.2\"}}]\n  workload: {{sortedSet: {{members: 20000, sampleEvery: 1000}}}}\n  repetitions: {REPETITIONS}\n  settleSeconds: 1\n  timeoutSeconds: 3600\n"
    ))
    .unwrap()
    .remove(0);
    b.metadata.uid = Some("uid-1".into());
    b.metadata.generation = Some(1);
    b.metadata.creation_timestamp = Some(Time(at(0)));
    reconcile(&mut b, &[], 0, None);
    b
}

/// What a client of [`hundred_repetitions`] measured: every repetition settled, the first with
/// its 20-point curve, figures that vary as real ones do.
fn report() -> BenchmarkReport {
    let repetitions = (1..=REPETITIONS)
        .map(|i| {
            let mut r = repetition(i, 96.0 + f64::from(i % 7) * 0.37);
            // Figures that vary as a real run's do (pages reused, timings), so the difference
            // encoding cannot make them short.
            let jitter = u64::from(i) * 7919 * 1237 % 9_999_991;
            r.used_memory_rss += jitter * 13;
            r.used_memory += jitter;
            r.baseline_used_memory += jitter % 4_093;
            r.seconds += (jitter % 100_003) as f64 / 1e6;
            r.used_memory_dataset = Some(r.used_memory - 80_000 - jitter % 65_536);
            r.mem_fragmentation_ratio = Some(1.1 + f64::from(i % 5) / 100.0);
            r.settled = Some(SettledMemory {
                after_seconds: 1,
                used_memory: r.used_memory - 1_000 - jitter % 8_191,
                used_memory_rss: r.used_memory_rss - jitter % 409_600,
                bytes_per_item: 0.0,
            });
            if i == 1 {
                r.samples = (1..=20)
                    .map(|k| MemorySample {
                        items: k * 1000,
                        used_memory: 900_000 + k * 96_123 + (k * k * 797) % 4096,
                    })
                    .collect();
            }
            r
        })
        .collect();
    let mut report = report_of("redis", "7.0.15", repetitions, None);
    report.repetitions_requested = REPETITIONS;
    report
}

fn done() -> Option<LoadProbe> {
    Some(LoadProbe {
        repetitions_begun: Some(REPETITIONS),
        loaded_percent: Some(100),
        done: true,
        finishing: true,
        mark: None,
    })
}

fn served(pod: &Pod, report: &BenchmarkReport) -> ServedResult {
    let body = ClientResult::whole(report).to_message();
    ServedResult {
        pod: pod.name_any(),
        result: ClientResult::read_whole(&body, REPETITIONS),
    }
}

fn observe(
    b: &mut MemoryBenchmark,
    pods: &[Pod],
    now: i64,
    load: Option<LoadProbe>,
    served: &[ServedResult],
) -> crate::controller::decide::observation::Plan {
    reconcile_served(b, pods, now, load, &[], &[], served)
}

fn engine(b: &MemoryBenchmark) -> crate::crd::EngineStatus {
    b.status.as_ref().unwrap().engines[0].clone()
}

fn measuring_hundred() -> (MemoryBenchmark, Pod, Pod) {
    let mut b = hundred_repetitions();
    let engine = first_engine_ready(&mut b, 0);
    let client = ready(client_created(&mut b, &engine, 5), "r8g-1", "127.1.0.3");
    reconcile(&mut b, &[engine.clone(), client.clone()], 6, None);
    (b, engine, client)
}

#[test]
fn a_client_that_is_done_has_its_whole_result_taken_every_repetition_settled_and_the_curve() {
    let report = report();
    // What the termination message would carry: not all of it.
    let fitted = ClientResult::from_report(&report);
    eprintln!(
        "termination message {} bytes (omitted {}, curve {}), whole {} bytes",
        fitted.to_message().len(),
        fitted.omitted,
        fitted.growth.is_some(),
        ClientResult::whole(&report).to_message().len()
    );
    assert!(
        fitted.omitted > 0 && fitted.growth.is_none(),
        "the termination message holds it all: the test shows nothing"
    );
    let (mut b, engine_pod, client) = measuring_hundred();
    let pods = [engine_pod.clone(), client.clone()];
    let plan = observe(&mut b, &pods, 200, done(), &[served(&client, &report)]);
    let first = engine(&b);
    assert_eq!(first.state, EngineState::Succeeded, "{:?}", first.message);
    assert_eq!(first.repetitions.len(), REPETITIONS as usize);
    for (status, measured) in first.repetitions.iter().zip(&report.repetitions) {
        assert_eq!(status.used_memory, measured.used_memory);
        assert_eq!(status.used_memory_rss, measured.used_memory_rss);
        assert_eq!(
            status.settled_used_memory,
            Some(measured.settled.as_ref().unwrap().used_memory)
        );
        assert_eq!(status.used_memory_dataset, measured.used_memory_dataset);
    }
    let curve: Vec<(u64, u64)> = first
        .growth
        .iter()
        .map(|p| (p.items, p.used_memory))
        .collect();
    let samples: Vec<(u64, u64)> = report.repetitions[0]
        .samples
        .iter()
        .map(|s| (s.items, s.used_memory))
        .collect();
    assert_eq!(curve, samples);
    assert_eq!(first.message, None, "nothing was left out");
    // The client waits for its pod to be deleted: that ends it.
    assert!(
        plan.delete.contains(&client.name_any()),
        "{:?}",
        plan.delete
    );
    assert!(
        plan.release.contains(&client.name_any()),
        "{:?}",
        plan.release
    );
}

#[test]
fn a_served_result_is_taken_only_when_the_client_says_done_and_only_from_its_latest_pod() {
    let report = report();
    let (mut b, engine_pod, client) = measuring_hundred();
    let pods = [engine_pod, client.clone()];
    let not_done = Some(LoadProbe {
        repetitions_begun: Some(REPETITIONS),
        loaded_percent: Some(100),
        done: false,
        finishing: true,
        mark: None,
    });
    let plan = observe(&mut b, &pods, 200, not_done, &[served(&client, &report)]);
    assert_eq!(engine(&b).reason, Some(ConditionReason::Measuring));
    assert_eq!(
        plan.requeue,
        Some(std::time::Duration::from_secs(1)),
        "a finishing client is looked at every second"
    );
    let mut other = served(&client, &report);
    other.pod = "zset-0-client-2".into();
    observe(&mut b, &pods, 201, done(), &[other]);
    assert_eq!(engine(&b).reason, Some(ConditionReason::Measuring));
    assert!(engine(&b).repetitions.is_empty());
    // Done, but short of the repetitions asked for: not taken as the whole result.
    let mut short = report.clone();
    short.repetitions.truncate(99);
    short.summary = crate::client::measurement::measure::Summary::of(
        &short.repetitions,
        &crate::stats::StabilityThresholds::default(),
    );
    observe(&mut b, &pods, 202, done(), &[served(&client, &short)]);
    assert_eq!(engine(&b).reason, Some(ConditionReason::Measuring));
    assert!(engine(&b).repetitions.is_empty());
}

#[test]
fn a_result_the_client_could_not_serve_is_read_from_its_termination_message_after_all() {
    let report = report();
    let (mut b, engine_pod, client) = measuring_hundred();
    let unanswered = ServedResult {
        pod: client.name_any(),
        result: Err(ReadError::NoResult("did not answer".into())),
    };
    let pods = [engine_pod.clone(), client.clone()];
    observe(&mut b, &pods, 200, done(), &[unanswered]);
    assert_eq!(engine(&b).state, EngineState::Running);
    assert_eq!(engine(&b).reason, Some(ConditionReason::Measuring));
    // The client leaves (its wait ended): the fitted result of its termination message.
    let message = ClientResult::from_report(&report).to_message();
    let left = terminated(client, "r8g-1", 0, "Completed", &message, 240);
    observe(&mut b, &[engine_pod, left], 241, None, &[]);
    let first = engine(&b);
    assert_eq!(first.state, EngineState::Succeeded);
    let fitted = ClientResult::from_report(&report);
    assert_eq!(
        first.repetitions.len(),
        REPETITIONS as usize - fitted.omitted as usize
    );
}

#[test]
fn a_served_result_that_breaks_the_bounds_fails_the_engine_as_an_invalid_result() {
    let mut forged = ClientResult::whole(&report());
    forged.omitted = 5;
    let (mut b, engine_pod, client) = measuring_hundred();
    let refused = ServedResult {
        pod: client.name_any(),
        result: ClientResult::read_whole(&forged.to_message(), REPETITIONS),
    };
    assert!(matches!(refused.result, Err(ReadError::Invalid(_))));
    observe(&mut b, &[engine_pod, client], 200, done(), &[refused]);
    let first = engine(&b);
    assert_eq!(first.state, EngineState::Failed);
    assert_eq!(first.reason, Some(ConditionReason::InvalidClientResult));
    assert!(first.repetitions.is_empty());
}

fn lost(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(Time(at(30)));
    pod
}

#[test]
fn a_client_whose_node_stopped_reporting_keeps_the_repetitions_it_served() {
    let mut report = report();
    report.repetitions.truncate(37);
    let (mut b, engine_pod, client) = measuring_hundred();
    let pods = [lost(engine_pod), lost(client.clone())];
    observe(&mut b, &pods, 46, None, &[served(&client, &report)]);
    let first = engine(&b);
    assert_eq!(first.reason, Some(ConditionReason::NodeLost));
    assert_eq!(first.repetitions.len(), 37);
    let message = first.message.unwrap();
    assert!(
        message.contains("served the repetitions it finished"),
        "{message}"
    );
    assert!(message.contains("37 of 100 repetitions"), "{message}");
    assert!(!message.contains("is lost"), "{message}");

    // Without an answer, what the client measured there is lost, as before.
    let (mut b, engine_pod, client) = measuring_hundred();
    let pods = [lost(engine_pod), lost(client)];
    observe(&mut b, &pods, 46, None, &[]);
    let first = engine(&b);
    assert_eq!(first.reason, Some(ConditionReason::NodeLost));
    assert!(first.repetitions.is_empty());
    assert!(first.message.unwrap().contains("is lost"));
}

#[test]
fn the_whole_result_is_read_from_a_client_that_is_done_or_whose_node_stopped_reporting() {
    let (b, engine_pod, client) = measuring_hundred();
    let pods = [engine_pod.clone(), client.clone()];
    let targets = |pods: &[Pod], load, now| {
        result_targets(&b, pods, load, at(now), &settings())
            .into_iter()
            .map(|(pod, target)| (pod, target.address.to_string()))
            .collect::<Vec<_>>()
    };
    let client_at = vec![(client.name_any(), "127.1.0.3:9121".to_string())];
    assert_eq!(targets(&pods, done(), 200), client_at);
    let loading = Some(LoadProbe {
        repetitions_begun: Some(3),
        loaded_percent: Some(40),
        ..Default::default()
    });
    assert!(targets(&pods, loading, 200).is_empty());
    assert!(targets(&pods, None, 200).is_empty());
    let gone = [lost(engine_pod), lost(client)];
    // Within the margin a kubelet could still stop them; past it the node counts as lost.
    assert!(targets(&gone, None, 40).is_empty());
    assert_eq!(targets(&gone, None, 46), client_at);
}

#[test]
fn a_status_of_100_repetitions_per_engine_stays_far_below_what_the_api_server_stores() {
    let report = report();
    let (mut b, engine_pod, client) = measuring_hundred();
    let pods = [engine_pod, client.clone()];
    observe(&mut b, &pods, 200, done(), &[served(&client, &report)]);
    let mut status = b.status.clone().unwrap();
    assert_eq!(status.engines[0].repetitions.len(), REPETITIONS as usize);
    // Both engines with a whole result, as at the end of the run.
    status.engines[1] = status.engines[0].clone();
    let bytes = serde_json::to_string(&status).unwrap().len();
    eprintln!("a status of 2 engines × 100 repetitions: {bytes} bytes");
    // etcd's default request limit is 1.5 MiB.
    assert!(bytes < 2 * 40 * 1024, "{bytes} bytes");
}

#[test]
fn a_client_looked_at_every_second_while_it_finishes_does_not_rewrite_the_status() {
    let (mut b, engine_pod, client) = measuring_hundred();
    let pods = [engine_pod, client];
    let finishing = Some(LoadProbe {
        repetitions_begun: Some(REPETITIONS),
        loaded_percent: Some(100),
        done: false,
        finishing: true,
        mark: None,
    });
    observe(&mut b, &pods, 200, finishing, &[]);
    let before = b.status.clone();
    for now in 201..205 {
        let plan = observe(&mut b, &pods, now, finishing, &[]);
        assert_eq!(Some(&plan.status), before.as_ref(), "at {now}");
    }
}

#[test]
fn a_benchmark_of_many_runs_lists_fewer_repetitions_per_run_so_its_status_stays_within_bounds() {
    use crate::controller::decide::results::{
        REPETITION_STATUS_BYTES, STATUS_REPETITIONS_BUDGET, listed_per_run,
    };
    assert_eq!(listed_per_run(2, 100, 0), 100);
    assert_eq!(listed_per_run(26, 100, 0), 100);
    assert_eq!(listed_per_run(1, 3, 0), 3);
    // 32 engines on 4 instance types: the most a spec may ask for.
    let most = listed_per_run(128, 100, 0);
    assert!((10..100).contains(&most), "{most}");
    assert!(128 * most as usize * REPETITION_STATUS_BYTES <= STATUS_REPETITIONS_BUDGET);
    assert_eq!(listed_per_run(1_000_000, 100, 0), 1);
    // Ten churn rounds with defragmentation in every repetition: fewer listed, within bounds.
    let churn = crate::crd::ChurnSpec {
        rounds: 10,
        delete_share: Some(0.5),
        overwrite_share: None,
        overwrite_value_size: None,
        defrag: true,
        defrag_seconds: 60,
        seed: 1,
    };
    let mut spec: crate::crd::MemoryBenchmarkSpec =
        serde_json::from_str(r#"{"engines": [{"engine": "redis", "version": "7.0.15"}], "workload": {"strings": {"keys": 1000}}}"#)
            .unwrap();
    spec.churn = Some(churn);
    let extra = crate::controller::decide::results::churn_status_bytes(&spec);
    let churned = listed_per_run(26, 100, extra);
    assert!(churned < 100, "{churned}");
    assert!(26 * churned as usize * (REPETITION_STATUS_BYTES + extra) <= STATUS_REPETITIONS_BUDGET);
}
